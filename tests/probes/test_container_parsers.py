"""The containers probe's pure parsers, driven by what real runtimes left on a real host
(tests/fixtures/containers/README.md says how each capture was made)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from driftwatch.probes.base import ProbeError
from driftwatch.probes.container_identity import docker_host, identify, label, parse_cgroup
from driftwatch.probes.containers import build, container_facts
from driftwatch.probes.runtime_cli import (
    parse_crictl_inspect,
    parse_crictl_inspecti,
    parse_ctr_images,
    parse_ctr_info,
    parse_image_inspect,
    parse_inspect,
)
from driftwatch.probes.server_limits import (
    cpu_count,
    parse_cgroup_limits,
    parse_kernel,
    parse_limits,
    parse_shm,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "containers"
PODMAN_ID = "54f101f61ddda7f0cdecabd30e5e299a085cfe44b36add88b2e77fa1ebedffb1"


def walk(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / f"walk-{name}.json").read_text())


def text(name: str) -> str:
    return (FIXTURES / name).read_text()


@pytest.mark.parametrize(("line", "runtime", "cid"), [
    ("4:memory:/docker/" + "a" * 64, "docker", "a" * 64),  # cgroupfs driver, v1
    ("0::/system.slice/docker-" + "b" * 64 + ".scope", "docker", "b" * 64),  # systemd driver, v2
    ("0::/libpod_parent/libpod-" + "c" * 64, "podman", "c" * 64),
    ("0::/machine.slice/libpod-" + "c" * 64 + ".scope/container", "podman", "c" * 64),
    ("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0d1f4a52_6c3b_4f0e_9a57_3b8e2c1f7a10.slice/"
     "cri-containerd-" + "d" * 64 + ".scope", "containerd", "d" * 64),
    ("0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod0d1f4a52_6c3b_4f0e_9a57_3b8e2c1f7a10.slice/"
     "crio-" + "e" * 64 + ".scope", "cri-o", "e" * 64),
    ("1:cpu:/kubepods/besteffort/pod0d1f4a52-6c3b-4f0e-9a57-3b8e2c1f7a10/" + "f" * 64, None, "f" * 64),
    ("0::/user.slice/user-0.slice/session-3.scope", None, None),
])
def test_cgroup_paths_of_each_runtime_and_driver(line: str, runtime: str | None, cid: str | None) -> None:
    found = parse_cgroup(line)
    assert (found["runtime"], found["id"]) == (runtime, cid)
    if "pod0d1f" in line:
        assert found["pod_uid"] == "0d1f4a52-6c3b-4f0e-9a57-3b8e2c1f7a10"


def test_podman_container_named_by_conmon_with_its_store_for_the_cli() -> None:
    found = identify(walk("podman")["context"])
    assert found is not None
    assert (found["runtime"], found["id"], found["name"]) == ("podman", PODMAN_ID, "sg-a")
    assert found["image_ref"] == "docker.io/lmsysorg/sglang:latest" and found["image_id"].startswith("fde9989d")
    assert found["cli"] == {"tool": "podman", "args": ["--root", "/tmp/ctx/podman/root", "--runroot", "/tmp/ctx/podman/run",
                                                      "--storage-driver", "overlay", "--cgroup-manager", "cgroupfs",
                                                      "--tmpdir", "/tmp/ctx/podman/tmp"]}
    assert "conmon" in found["evidence"] and label(found) == "sg-a"


def test_docker_container_named_by_its_config_and_found_behind_its_own_daemon() -> None:
    found = identify(walk("docker")["context"])
    assert found is not None
    assert (found["runtime"], found["name"], found["image_ref"]) == ("docker", "sg-d", "lmsysorg/sglang:latest")
    assert found["image_id"].startswith("sha256:") and found["shm_size"] == 64 << 20 and found["ipc_mode"] == "private"
    daemons = json.loads(text("walk-host.json"))["docker_daemons"]
    assert docker_host(daemons, found["data_root"]) == "unix:///tmp/ctx/docker/docker.sock"
    assert docker_host(daemons, "/var/lib/docker") is None  # the CLI's own default socket


def test_pod_container_named_by_its_cri_annotations() -> None:
    found = identify(walk("containerd-k8s")["context"])
    assert found is not None
    assert found["runtime"] == "containerd" and found["namespace"] == "k8s.io"
    assert found["pod"] == {"name": "sglang-0", "namespace": "inference", "uid": "0d1f4a52-6c3b-4f0e-9a57-3b8e2c1f7a10",
                            "container": "server"}
    assert label(found) == "inference/sglang-0/server"
    assert found["cli"] == {"tool": "ctr", "args": ["--address", "/tmp/ctx/ctrd/containerd.sock", "-n", "k8s.io"]}


def test_a_host_process_and_an_unshared_mount_namespace_are_not_containers() -> None:
    assert identify({"cgroup": "0::/user.slice", "container": None}) is None
    unshared = {"cgroup": "0::/user.slice", "root_is_host": True,
                "container": {"ancestors": [{"pid": 9, "argv": ["unshare", "-m", "sh"], "cwd": "/"}],
                              "markers": {".dockerenv": False, "run/.containerenv": False}}}
    assert identify(unshared) is None
    unshared["root_is_host"] = False  # its own root, no runtime we know: still a container
    assert identify(unshared)["runtime"] == "unknown"


def test_marker_files_alone_only_hint_and_never_override_the_host() -> None:
    context = copy.deepcopy(walk("podman")["context"])
    context["container"]["markers"][".dockerenv"] = True  # an image can ship a /.dockerenv
    assert identify(context)["runtime"] == "podman"


def test_hostile_names_from_a_runtime_stay_bounded_data() -> None:
    context = copy.deepcopy(walk("docker")["context"])
    context["container"]["state"]["Name"] = "/\x1b[31mred\n" + "x" * 5000
    context["container"]["state"]["image_ref"] = ["not", "a", "string"]
    found = identify(context)
    assert len(found["name"]) <= 256 and found["name"].startswith("\x1b[31m")  # escaped by whoever prints it
    assert found["image_ref"] is None


def test_inspect_outputs_of_docker_and_podman() -> None:
    docker = parse_inspect(text("docker_inspect.json"))
    (entry,) = docker.values()
    assert entry["name"] == "sg-d" and entry["image_ref"] == "lmsysorg/sglang:latest"
    assert entry["shm_size"] == 64 << 20 and entry["restart_count"] == 0 and entry["started"]
    podman = parse_inspect(text("podman_inspect.json"))[PODMAN_ID]
    assert podman["image_ref"] == "docker.io/lmsysorg/sglang:latest" and podman["image_digest"].startswith("sha256:")
    images = parse_image_inspect(text("podman_image_inspect.json"))
    assert images[podman["image_id"]]["tags"] == ["docker.io/lmsysorg/sglang:latest"]
    assert images["sha256:" + podman["image_id"]] is images[podman["image_id"]]
    (docker_image,) = parse_image_inspect(text("docker_image_inspect.json")).values()
    assert docker_image["tags"] == ["lmsysorg/sglang:latest"] and docker_image["created"]


def test_ctr_outputs() -> None:
    info = parse_ctr_info(text("ctr_containers_info.json"))
    assert info["image_ref"] == "docker.io/lmsysorg/sglang:latest"
    assert info["labels"]["io.kubernetes.pod.name"] == "sglang-0"
    images = parse_ctr_images(text("ctr_images_ls.txt"))
    assert images["docker.io/lmsysorg/sglang:latest"].startswith("sha256:")


K8S_ID = "abc123def4567890abc123def4567890abc123def4567890abc123def4567890"
MANIFEST = "sha256:bdfcc2b9eaa729132df6344006797d529944dbea214b25aba8f8c40eda74064a"


def test_crictl_outputs_for_one_id_several_and_older_streams() -> None:
    one = parse_crictl_inspect(text("crictl_inspect.json"))[K8S_ID]
    assert one["image_ref"] == "lmsysorg/sglang:latest"  # as the pod spec names it
    assert one["image_digest"] == MANIFEST and one["image_id"].startswith("sha256:5e0f8c1d")
    assert one["restart_count"] == 3 and one["started"].startswith("2026-12-01T22:14:16")
    assert one["labels"]["io.kubernetes.pod.name"] == "sglang-0"
    other = json.loads(text("crictl_inspect.json"))
    other["status"].update(id="f" * 64, annotations={}, metadata={"attempt": 1, "name": "sidecar"})
    del other["status"]["imageId"], other["status"]["image"]["userSpecifiedImage"]
    listed = parse_crictl_inspect(json.dumps([json.loads(text("crictl_inspect.json")), other]))  # crictl ≥ 1.26
    streamed = parse_crictl_inspect(text("crictl_inspect.json") + json.dumps(other, indent=2))  # earlier crictl
    assert listed == streamed and set(listed) == {K8S_ID, "f" * 64}
    older = listed["f" * 64]  # no kubelet annotation, no imageId: the attempt, and the digest it resolved to
    assert (older["restart_count"], older["image_ref"], older["image_id"]) == (1, "docker.io/lmsysorg/sglang:latest", None)
    with pytest.raises(ProbeError, match="unreadable crictl inspect output"):
        parse_crictl_inspect('{"status": {"id": "x"}} trailing')
    images = parse_crictl_inspecti(text("crictl_inspecti.json"))
    by_digest = images[f"docker.io/lmsysorg/sglang@{MANIFEST}"]
    assert by_digest is images[one["image_id"]] and by_digest["created"] == "2026-02-25T14:02:00Z"
    assert by_digest["tags"] == ["docker.io/lmsysorg/sglang:latest"]


def test_crictl_answer_completes_a_pods_identity() -> None:
    found = identify(walk("containerd-k8s")["context"])
    answer = {"containers": parse_crictl_inspect(text("crictl_inspect.json")),
              "images": parse_crictl_inspecti(text("crictl_inspecti.json")), "error": None}
    facts = container_facts(found, answer)
    assert facts["label"] == "inference/sglang-0/server" and facts["restart_count"] == 3
    assert facts["image"]["ref"] == "docker.io/lmsysorg/sglang:latest"  # the bundle's annotation, from the host
    assert facts["image"]["digests"] == [f"docker.io/lmsysorg/sglang@{MANIFEST}"]
    assert facts["image"]["created"] == "2026-02-25T14:02:00Z"


def test_a_cri_o_container_is_described_by_crictl() -> None:
    context = copy.deepcopy(walk("podman")["context"])
    shim = context["container"]["ancestors"][-1]
    shim["argv"] = ["/usr/bin/conmon", "-b", "/run/containers/storage/overlay-containers/" + "e" * 64 + "/userdata",
                    "-c", "e" * 64, "-n", "k8s_server_sglang-0_inference_0d1f4a52_0", "-r", "/usr/bin/runc"]
    found = identify(context)
    assert found is not None and found["runtime"] == "cri-o" and found["cli"] == {"tool": "crictl", "args": []}


def test_cli_answer_completes_the_host_identity() -> None:
    found = identify(walk("podman")["context"])
    answer = {"containers": parse_inspect(text("podman_inspect.json")),
              "images": parse_image_inspect(text("podman_image_inspect.json")), "error": None}
    facts = container_facts(found, answer)
    assert facts["image"]["tags"] == ["docker.io/lmsysorg/sglang:latest"] and facts["image"]["created"]
    assert facts["shm_size"] == 32 << 30 and facts["cli"] == {"error": None}
    missing = container_facts(found, {"containers": {}, "images": {}, "error": "the podman CLI is not installed"})
    assert missing["image"]["ref"] == "docker.io/lmsysorg/sglang:latest"  # the host's files still say it
    assert missing["cli"] == {"error": "the podman CLI is not installed"}


def test_limits_cgroup_shm_and_kernel() -> None:
    limits = parse_limits(text("proc_limits_podman.txt"))
    assert limits["nofile"] == {"soft": 1024, "hard": 4096} and limits["memlock"]["soft"] == 8 << 20
    assert parse_limits(None)["error"]
    context = walk("podman")["context"]
    cgroup = parse_cgroup_limits(context["cgroup_limits"])
    assert cgroup["cpu_limit"] == 1.0 and cgroup["cpu_limit_at"].startswith("/libpod_parent/libpod-")
    v2 = [{"hierarchy": "v2", "path": "/kubepods/pod1/c", "files": {"cpu.max": "max 100000", "memory.max": "max"}},
          {"hierarchy": "v2", "path": "/kubepods/pod1", "files": {"cpu.max": "400000 100000", "memory.max": "17179869184"}}]
    assert parse_cgroup_limits(v2) | {} == {"cpu_limit": 4.0, "cpu_limit_at": "/kubepods/pod1", "cpuset": None,
                                            "memory_limit": 16 << 30, "memory_limit_at": "/kubepods/pod1"}
    shm = parse_shm({"size": 64 << 20, "free": 1 << 20, "nccl_segments": [[100.0, 5 << 20], [900.0, 1 << 20]],
                     "error": None}, started=500.0)
    assert (shm["nccl_segments"], shm["stale_nccl_segments"], shm["stale_nccl_bytes"]) == (2, 1, 5 << 20)
    assert parse_shm({"error": "/dev/shm: Permission denied"}, None) == {"error": "/dev/shm: Permission denied"}
    kernel = parse_kernel(json.loads(text("walk-host.json"))["kernel"])
    assert kernel == {"numa_balancing": 0, "thp_enabled": "madvise", "thp_defrag": "madvise", "rdma_devices": []}
    assert cpu_count("0-3,8,10-11") == 7 and cpu_count("") is None


def test_a_host_server_gets_limits_and_no_container() -> None:
    raw = walk("podman")
    native = copy.deepcopy(raw)
    native["context"]["container"] = None
    native["context"]["cgroup"] = "0::/user.slice"
    report = {"processes": [dict(native, pid=1), dict(raw, pid=2, argv=[*raw["argv"][:-1], "30001"])]}
    facts = build(report, {}, {})
    servers = facts["servers"]
    assert set(servers) == {"sglang.launch_server@sg-a", "sglang.launch_server:30000"}
    assert servers["sglang.launch_server:30000"]["container"] is None
    assert "python" not in servers["sglang.launch_server:30000"]
    assert servers["sglang.launch_server@sg-a"]["container"]["name"] == "sg-a"
