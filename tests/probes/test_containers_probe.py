"""The containers probe's bad input, without a runtime daemon: a runtime CLI that hangs or is
absent, a container that exited, an image whose server has no Python, and a server in its
own root (``unshare -m`` + ``chroot`` into an image tree) read through /proc/PID/root."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from driftwatch.collect import run_probe
from driftwatch.model import ProbeStatus
from driftwatch.probes.base import ProbeContext, collector_script, load_script
from driftwatch.probes.containers import ContainersProbe
from driftwatch.probes.runtime_cli import ask, cli_context
from driftwatch.settings import WatchSettings
from driftwatch.transport.local import LocalTransport
from tests.rootfs import VENV, build_rootfs
from tests.runtimes import wait_started

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")


def test_a_hung_runtime_cli_is_a_timeout_fact_and_a_missing_one_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "bin" / "docker"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\nexec sleep 60\n")  # a docker inspect stuck on a wedged daemon
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    ctx = cli_context(ProbeContext(transport=LocalTransport(), timeout=2.0))
    started = time.monotonic()
    answer = ask(ctx, "docker", [], {"a" * 64: {"image_id": "sha256:" + "b" * 64}})
    assert time.monotonic() - started < 5
    assert answer["timeout"] is True and answer["error"].startswith("docker timed out")
    assert "what the host's files show is recorded" in answer["error"]
    missing = ask(ctx, f"dw-no-runtime-{uuid.uuid4().hex[:6]}", [], {"a" * 64: {}})
    assert "CLI is not installed" in missing["error"] and missing["containers"] == {}


FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "containers"
K8S_ID = "abc123def4567890abc123def4567890abc123def4567890abc123def4567890"


def fake_cli(folder: Path, name: str, body: str) -> None:
    """A runtime CLI on PATH that logs its argv and then runs ``body`` (sh)."""
    tool = folder / name
    tool.write_text(f'#!/bin/sh\necho "$0 $*" >> {folder}/calls\n{body}\n')
    tool.chmod(0o755)


@pytest.fixture
def bin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir()
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return folder


def test_a_pods_container_is_asked_of_crictl_on_containerds_socket_before_ctr(bin_dir: Path) -> None:
    fake_cli(bin_dir, "crictl", f'case "$*" in *inspecti*) cat {FIXTURES}/crictl_inspecti.json;; '
                                f'*) cat {FIXTURES}/crictl_inspect.json;; esac')
    fake_cli(bin_dir, "ctr", "exit 1")
    ctx = cli_context(ProbeContext(transport=LocalTransport(), timeout=10.0))
    answer = ask(ctx, "ctr", ["--address", "/run/k8s/containerd.sock", "-n", "k8s.io"], {K8S_ID: {}})
    assert answer["error"] is None and answer["containers"][K8S_ID]["restart_count"] == 3
    calls = (bin_dir / "calls").read_text().splitlines()
    assert [c.split(" ", 1)[1] for c in calls] == [
        f"--runtime-endpoint unix:///run/k8s/containerd.sock inspect --quiet --output json {K8S_ID}",
        "--runtime-endpoint unix:///run/k8s/containerd.sock inspecti --output json "
        "docker.io/lmsysorg/sglang@sha256:bdfcc2b9eaa729132df6344006797d529944dbea214b25aba8f8c40eda74064a"]


def test_crictl_without_a_cri_on_that_socket_leaves_it_to_ctr(bin_dir: Path) -> None:
    # containerd with its CRI plugin disabled (or another runtime on the socket): crictl fails.
    fake_cli(bin_dir, "crictl", "echo 'rpc error: code = Unimplemented desc = unknown service "
                                "runtime.v1.RuntimeService' >&2; exit 1")
    fake_cli(bin_dir, "ctr", f'case "$*" in *"images ls"*) cat {FIXTURES}/ctr_images_ls.txt;; '
                             f'*) cat {FIXTURES}/ctr_containers_info.json;; esac')
    ctx = cli_context(ProbeContext(transport=LocalTransport(), timeout=10.0))
    answer = ask(ctx, "ctr", ["-n", "k8s.io"], {K8S_ID: {}})
    assert answer["error"] is None and answer["containers"][K8S_ID]["labels"]["io.kubernetes.pod.name"] == "sglang-0"
    assert "docker.io/lmsysorg/sglang:latest" in answer["images"]
    # Without crictl (most nodes that run ctr by hand), ctr answers as before; a hung crictl
    # is a timeout that names it, never a wait for ctr after it.
    (bin_dir / "crictl").unlink()
    assert ask(ctx, "ctr", ["-n", "k8s.io"], {K8S_ID: {}})["error"] is None
    fake_cli(bin_dir, "crictl", "exec sleep 60")
    hung = ask(cli_context(ProbeContext(transport=LocalTransport(), timeout=2.0)), "ctr", ["-n", "k8s.io"], {K8S_ID: {}})
    assert hung["timeout"] is True and hung["error"].startswith("crictl timed out")


def collect(request: dict) -> dict:
    code = load_script("containers_collect.py")
    out = subprocess.run([sys.executable, "-I", "-S", "-c", code], input=json.dumps(request).encode(),
                         capture_output=True, check=True, timeout=60).stdout
    return json.loads(out)["servers"]


def modules() -> dict[str, str]:
    return {"python": collector_script("python_collect.py"),
            "libraries": load_script("elf_identity.py") + "\n\n" + load_script("libraries_collect.py")}


def test_a_container_that_exited_before_its_files_were_read(tmp_path: Path) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    found = collect({"modules": modules(), "budget_s": 10,
                     "servers": [{"key": "k", "pid": gone.pid, "argv": ["python3"], "env": {}}]})
    assert found == {"k": {"error": "the container exited while it was read"}}


class Image:
    """A server in its own mount namespace and root: ``unshare -m chroot ROOT python -m
    sglang.launch_server``, what a runtime does minus the cgroup and the shim."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.model = f"/models/dwu-{uuid.uuid4().hex[:10]}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> int:
        env = {"PATH": f"{VENV}/bin:/usr/bin:/bin", "SLEEP": "600"}
        argv = [shutil.which("unshare") or "unshare", "--mount", "--propagation", "private",
                shutil.which("chroot") or "chroot", str(self.root),
                "python3", "-m", "sglang.launch_server", "--model-path", self.model, "--tp", "2"]
        self.proc = subprocess.Popen(argv, env=env, start_new_session=True)
        return wait_started(self.model)

    def stop(self) -> None:
        if self.proc is not None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


@pytest.fixture
def image(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Image]:
    if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("chroot") is None:
        pytest.skip("SKIPPED LOUDLY: needs root, unshare and chroot to give a server its own root")
    work = tmp_path_factory.mktemp("unshared")
    started = Image(build_rootfs(work / "root", work=work))
    try:
        yield started
    finally:
        started.stop()


def probe(model: str) -> dict:
    settings = WatchSettings(python=[], processes=[f"--model-path {model}"])
    result = run_probe(ContainersProbe(), ProbeContext(transport=LocalTransport(), watch=settings, timeout=30))
    assert result.status is ProbeStatus.ok, result.error
    return result.facts


def test_the_stack_inside_another_root_is_read_through_it_not_from_the_host(image: Image) -> None:
    image.start()
    (server,) = probe(image.model)["servers"].values()
    assert server["container"]["runtime"] == "unknown" and "mount namespace" in server["container"]["evidence"]
    python = server["python"]
    assert python["error"] is None and python["executable"] == f"{VENV}/bin/python3"
    assert python["distributions"]["sgl-kernel"]["version"] == "0.3.16"
    assert python["distributions"]["sgl-kernel"]["location"] == f"{VENV}/lib/python{python['version']}/site-packages"
    files = server["libraries"]["files"]
    [ops] = [p for p in files if p.endswith("sgl_kernel/common_ops.so")]
    assert ops.startswith(VENV) and files[ops]["owners"] == {"sgl-kernel": "0.3.16"} and files[ops]["build_id"]
    assert server["limits"]["nofile"]["soft"] and server["limits"]["error"] is None
    # This image has no /dev/shm mounted: said so, never a size of 0.
    assert server["shm"] == {"error": "/dev/shm: No such file or directory"}


def test_an_image_whose_python_is_gone_is_an_error_fact_not_absent_packages(image: Image) -> None:
    image.start()
    venv_python = image.root / VENV.lstrip("/") / "bin" / "python3"
    venv_python.unlink()  # the server runs on; its image no longer has the interpreter
    (server,) = probe(image.model)["servers"].values()
    assert server["python"] == {"error": "python3 is not on the container's PATH"}
    assert server["libraries"] == {"error": "python3 is not on the container's PATH"}
