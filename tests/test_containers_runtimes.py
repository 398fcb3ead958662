"""End to end against real runtimes: podman with runc, docker.io's dockerd, containerd's ctr
with a Kubernetes-style container (tests/runtimes.py).

For each runtime, two sleeping SGLang stand-ins run in containers of one image
(``lmsysorg/sglang:latest`` built from this machine's Python, sgl-kernel 0.3.16 inside), both
on port 30000 in their own network namespaces. ``snapshot`` records them; ``doctor`` names the
64 MiB /dev/shm under ``--tp 8``. Then the reference moves to a rebuilt image (sgl-kernel
0.3.17), and both containers are started again the other way round, one with another
/dev/shm and CPU quota: ``diff`` leads the containers' changes with the image, names the
sgl-kernel move inside it, lists the limits, and never compares the two servers crosswise.

Hermetic: the watched pattern holds a model path unique to this session, so only these
containers are seen. Where a runtime cannot start here the test skips, saying why.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from driftwatch.cli import main
from driftwatch.collect import run_probe
from driftwatch.model import ProbeStatus
from driftwatch.probes.base import ProbeContext, collector_script, load_script
from driftwatch.probes.containers import ContainersProbe, stack_facts
from driftwatch.settings import WatchSettings
from driftwatch.transport.local import LocalTransport
from tests.rootfs import build_rootfs, image_tar, oci_archive
from tests.runtimes import RUNTIMES, Runtime, Unavailable

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")

MiB = 1 << 20


@pytest.fixture(scope="session")
def images(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Path]]:
    """The image before and after the move, as a plain tar and as an OCI archive (built once)."""
    out: dict[str, dict[str, Path]] = {}
    for version in ("0.3.16", "0.3.17"):
        work = tmp_path_factory.mktemp(f"image-{version}")
        root = build_rootfs(work / "root", sgl_kernel=version, work=work)
        out[version] = {"tar": image_tar(root, work / "image.tar"),
                        "oci": oci_archive(root, work / "oci.tar", "docker.io/lmsysorg/sglang:latest")}
    return out


@pytest.fixture(params=sorted(RUNTIMES))
def runtime(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runtime]:
    try:
        started = RUNTIMES[request.param](tmp_path_factory.mktemp(request.param))
    except Unavailable as exc:
        pytest.skip(f"SKIPPED LOUDLY: {request.param} cannot run containers here: {exc}")
    try:
        yield started
    finally:
        started.close()


def image_of(runtime: Runtime, images: dict[str, dict[str, Path]], version: str) -> Path:
    return images[version]["oci" if runtime.name == "containerd" else "tar"]


def cli(*argv: str) -> int:
    return main(list(argv))


def test_image_moved_under_its_tag_limits_and_two_servers_across_a_restart(
    runtime: Runtime, images: dict[str, dict[str, Path]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    tag = uuid.uuid4().hex[:10]
    model = f"/models/dwc-{tag}"
    (tmp_path / "driftwatch.toml").write_text(
        f'store = "{tmp_path}/store"\nlocal_name = "node"\ntimeout = 30\n'
        f'[watch]\npython = []\nrepos = []\nfiles = []\nlogs = []\nprocesses = ["--model-path {model}-"]\n')
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "250")  # show's columns unwrapped
    a, b = f"sg-a-{tag}", f"sg-b-{tag}"
    runtime.load(image_of(runtime, images, "0.3.16"))
    runtime.run(a, f"{model}-a", {"SGLANG_TAG": "a"}, shm=64 * MiB, cpus=1.5)
    runtime.run(b, f"{model}-b", {"SGLANG_TAG": "b"}, shm=64 * MiB)
    assert cli("snapshot", "local", "--label", "good") in (0, 3)  # 3: no nvidia-smi here, the rest is stored
    capsys.readouterr()

    assert cli("doctor", "node@good", "--json") == 2
    [doctor] = json.loads(capsys.readouterr().out)
    shm = [f for f in doctor["findings"] if f["rule"] == "shm-too-small"]
    assert len(shm) == 2 and all("64.0 MiB /dev/shm" in f["why"] for f in shm)

    assert cli("show", "node@good") == 0
    shown = capsys.readouterr().out
    assert "Containers" in shown and "sgl-kernel 0.3.16" in shown and runtime.name in shown

    runtime.load(image_of(runtime, images, "0.3.17"))  # the same reference, another image
    runtime.remove(a)
    runtime.remove(b)
    runtime.run(b, f"{model}-b", {"SGLANG_TAG": "b"}, shm=64 * MiB)  # the other order: b gets the lower pid
    runtime.run(a, f"{model}-a", {"SGLANG_TAG": "a"}, shm=256 * MiB, cpus=1.0)
    assert cli("snapshot", "local") in (0, 3)
    capsys.readouterr()

    assert cli("diff", "node@good", "node@latest", "--json") == 2
    changes: list[dict[str, Any]] = json.loads(capsys.readouterr().out)["changes"]
    ours = [c for c in changes if c["category"] == "container" or "in container" in c["explanation"]
            or c["item"].startswith("sglang.launch_server")]
    image = [c for c in ours if c["item"] == f"image {runtime.ref}"]
    assert len(image) == 1, [c["explanation"] for c in ours]
    assert "inside it: sgl-kernel 0.3.16 → 0.3.17" in image[0]["explanation"]
    assert image[0]["severity"] == "high"
    # "Was sgl-kernel upgraded by itself?": one diff, the image change first, the packages under it.
    assert changes[0]["item"] == f"image {runtime.ref}", [c["explanation"] for c in changes[:3]]
    inner = [c for c in changes if c["category"] == "package" and c["item"] == "sgl-kernel"]
    assert len(inner) == 2 and all("0.3.16 → 0.3.17" in c["explanation"] for c in inner)
    texts = {c["item"]: c["explanation"] for c in changes}
    key_a = next(k.removesuffix(" /dev/shm") for k in texts if k.endswith(" /dev/shm"))
    assert "sg-a" in key_a
    assert texts[f"{key_a} /dev/shm"].endswith("64.0 MiB → 256.0 MiB")
    assert "CPU quota 1.5 CPUs → 1 CPU " in texts[f"{key_a} cpu limit"]
    # Two servers, one entry point, one port: each compared with itself, never crosswise.
    assert not any(c["item"] == "SGLANG_TAG" for c in changes)
    assert not any("is no longer running" in c["explanation"] for c in changes)
    # The container's libraries were read through its own root: the build that was loaded.
    latest = json.loads(sorted((tmp_path / "store" / "node").glob("*.json"))[-1].read_text())
    assert latest["probes"]["libraries"]["facts"]["servers"] == {}  # not looked up on the host's filesystem
    rebuilt = [c for c in changes if "common_ops.so" in c["explanation"]]
    assert rebuilt and all("0.3.16 → 0.3.17" in c["explanation"] for c in rebuilt), [c["explanation"] for c in rebuilt]


def test_a_container_in_its_own_user_namespace(
    images: dict[str, dict[str, Path]], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """``podman run --uidmap``: the container's root is uid 100000 on the host. driftwatch as
    root on the node reads the stack inside it; as any other user it cannot enter the
    container's root, and says so for that server: never an image without packages."""
    try:
        podman = RUNTIMES["podman"](tmp_path_factory.mktemp("userns"))
    except Unavailable as exc:
        pytest.skip(f"SKIPPED LOUDLY: podman cannot run containers here: {exc}")
    try:
        model = f"/models/dwu-{uuid.uuid4().hex[:10]}"
        podman.load(images["0.3.16"]["tar"])
        pid = podman.run("sg-userns", model, {}, more=("--uidmap=0:100000:65536", "--gidmap=0:100000:65536"))
        assert Path(f"/proc/{pid}/uid_map").read_text().split() == ["0", "100000", "65536"]
        assert Path(f"/proc/{pid}/status").read_text().count("\t100000\t") >= 1  # not root on the host

        settings = WatchSettings(python=[], processes=[f"--model-path {model}"])
        result = run_probe(ContainersProbe(), ProbeContext(transport=LocalTransport(), watch=settings, timeout=30))
        assert result.status is ProbeStatus.ok, result.error
        (server,) = result.facts["servers"].values()
        assert server["container"]["runtime"] == "podman" and server["container"]["name"] == "sg-userns"
        assert server["python"]["distributions"]["sgl-kernel"]["version"] == "0.3.16"
        [ops] = [p for p in server["libraries"]["files"] if p.endswith("sgl_kernel/common_ops.so")]
        assert server["libraries"]["files"][ops]["owners"] == {"sgl-kernel": "0.3.16"}

        system_python = shutil.which("python3", path="/usr/bin:/bin")
        if system_python is None:
            pytest.skip("SKIPPED LOUDLY: no /usr/bin/python3 to run the collector as an unprivileged user")
        request = {"modules": {"python": collector_script("python_collect.py"),
                               "libraries": load_script("elf_identity.py") + "\n\n" + load_script("libraries_collect.py")},
                   "budget_s": 10, "servers": [{"key": "k", "pid": pid, "argv": server_argv(pid), "env": {}}]}
        nobody = subprocess.run([system_python, "-I", "-S", "-c", load_script("containers_collect.py")],
                                input=json.dumps(request).encode(), capture_output=True, timeout=60, check=True,
                                user=65534, group=65534, extra_groups=[], cwd="/")
        [reason] = json.loads(nobody.stdout)["servers"].values()
        assert reason["error"].startswith("cannot enter the container's root (")
        assert reason["error"].endswith("): driftwatch needs root on the node")
        assert stack_facts(reason) == {"python": {"error": reason["error"]}, "libraries": {"error": reason["error"]}}
    finally:
        podman.close()


def server_argv(pid: int) -> list[str]:
    return [w.decode() for w in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if w]
