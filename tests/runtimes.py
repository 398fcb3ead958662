"""Real container runtimes for the tests, each with its state under a temp folder.

* podman with runc (Debian 12's crun cannot run on hybrid cgroups): a CONTAINERS_CONF with
  ``runtime = "runc"``, ``cgroup_manager = "cgroupfs"``, ``events_logger = "file"`` and
  ulimits at or below this machine's hard limits; ``--root``/``--runroot``/``--tmpdir`` here.
* docker.io's dockerd: its own ``--data-root``, ``--exec-root``, socket and pidfile,
  ``--iptables=false --bridge=none`` (no network is touched).
* containerd with ``ctr -n k8s.io``: its own root, state and socket, the CRI plugin off;
  containers get a Kubernetes-style cgroup (``/kubepods/besteffort/pod<uid>/<id>``), the CRI
  annotations and the kubelet's labels, as a pod's container has.

Images come from ``tests/rootfs.py`` (no registry). Containers run with ``--network none``.
Each runtime says why it cannot start here (``Unavailable``); the tests then skip loudly.
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path

from tests.rootfs import VENV

SERVER = [f"{VENV}/bin/python3", "-m", "sglang.launch_server"]


class Unavailable(Exception):
    """This runtime cannot run containers on this machine (the reason says what is missing)."""


def _run(argv: list[str], timeout: float = 60, env: dict[str, str] | None = None) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env, check=False)
    except subprocess.TimeoutExpired as exc:
        raise Unavailable(f"{argv[0]} {argv[1] if len(argv) > 1 else ''}: timed out after {timeout}s") from exc
    if done.returncode != 0:
        raise Unavailable(f"{' '.join(argv[:4])}…: {(done.stderr or done.stdout).strip()[-600:]}")
    return done.stdout


def _need(*tools: str) -> None:
    missing = [tool for tool in tools if shutil.which(tool) is None]
    if missing:
        raise Unavailable(f"not installed: {', '.join(missing)} (apt-get install podman runc docker.io containerd; "
                          ".ci/run does it)")
    if os.geteuid() != 0:
        raise Unavailable("container runtimes need root here")


def _wait(predicate, what: str, log: Path, timeout: float = 30) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            tail = log.read_text(errors="replace")[-800:] if log.exists() else ""
            raise Unavailable(f"{what} did not come up in {timeout:g}s: {tail}")
        time.sleep(0.1)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def wait_started(model: str, timeout: float = 30) -> int:
    """The pid of the server serving ``model`` once it has mapped its kernel library (what a
    snapshot must see), as the host sees it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for name in os.listdir("/proc"):
            try:
                argv = Path(f"/proc/{name}/cmdline").read_bytes().split(b"\0")
                if model.encode() in argv and b"common_ops.so" in Path(f"/proc/{name}/maps").read_bytes():
                    return int(name)
            except (OSError, ValueError):
                continue
        time.sleep(0.05)
    raise AssertionError(f"the server of {model} did not start in {timeout:g}s")


class Runtime:
    """What the tests do with any of the three: load an image under a reference, run a
    sleeping server in a container, remove it."""

    name = ""
    ref = ""

    def load(self, tar: Path) -> None:
        raise NotImplementedError

    def run(self, name: str, model: str, env: dict[str, str], *, shm: int | None = None, cpus: float | None = None) -> int:
        """Starts the container; the server's pid as the host sees it."""
        raise NotImplementedError

    def remove(self, name: str) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class Podman(Runtime):
    name = "podman"
    ref = "docker.io/lmsysorg/sglang:latest"

    def __init__(self, root: Path) -> None:
        _need("podman", "runc", "conmon")
        root.mkdir(parents=True, exist_ok=True)
        soft, hard = resource.getrlimit(resource.RLIMIT_NPROC)
        nproc = min(4096, hard if hard != resource.RLIM_INFINITY else 4096)
        files = min(4096, resource.getrlimit(resource.RLIMIT_NOFILE)[1])
        conf = root / "containers.conf"
        conf.write_text(
            '[containers]\nnetns = "none"\n'
            f'default_ulimits = ["nofile={min(1024, files)}:{files}", "nproc={nproc}:{nproc}"]\n'
            f'[engine]\nruntime = "runc"\ncgroup_manager = "cgroupfs"\nevents_logger = "file"\n'
            f'events_logfile_path = "{root}/events.log"\n'
        )
        self.env = {**os.environ, "CONTAINERS_CONF": str(conf)}
        self.store = root / "root"
        # podman refuses a runroot longer than 50 characters (pytest's temp folders are).
        self.short = Path(f"/run/dw-{uuid.uuid4().hex[:8]}")
        self.short.mkdir()
        self.base = ["podman", "--root", str(root / "root"), "--runroot", str(self.short / "run"),
                     "--tmpdir", str(self.short / "tmp"), "--storage-driver", "overlay"]
        _run([*self.base, "info", "--format", "{{.Host.OCIRuntime.Name}}"], env=self.env)

    def load(self, tar: Path) -> None:
        _run([*self.base, "import", str(tar), self.ref], env=self.env)

    def run(self, name: str, model: str, env: dict[str, str], *, shm: int | None = None, cpus: float | None = None,
            more: tuple[str, ...] = ()) -> int:
        flags = [f"--shm-size={shm}b" if shm else "", f"--cpus={cpus}" if cpus else "", *more]
        envs = [f"--env={k}={v}" for k, v in env.items()]
        _run([*self.base, "run", "-d", "--name", name, "--network", "none", *filter(None, flags), *envs, self.ref,
              *SERVER, "--model-path", model, "--tp", "8", "--port", "30000"], env=self.env)
        return wait_started(model)

    def remove(self, name: str) -> None:
        _run([*self.base, "rm", "-f", "-t", "0", name], env=self.env)

    def close(self) -> None:
        subprocess.run([*self.base, "rm", "-a", "-f", "-t", "0"], env=self.env, capture_output=True, check=False)
        # Unmounts the store's overlay too, so the temp folder can be removed.
        subprocess.run([*self.base, "system", "reset", "-f"], env=self.env, capture_output=True, check=False)
        # The overlay driver bind-mounts its own folder onto itself, and reset leaves that mount:
        # without this, pytest cannot remove the temp folder and the mount outlives the run.
        overlay = self.store / "overlay"
        if os.path.ismount(overlay):
            subprocess.run(["umount", "-l", str(overlay)], capture_output=True, check=False)
        shutil.rmtree(self.short, ignore_errors=True)


class Docker(Runtime):
    name = "docker"
    ref = "lmsysorg/sglang:latest"

    def __init__(self, root: Path) -> None:
        _need("dockerd", "docker", "containerd", "runc")
        # /var/run/docker paths are too long for a unix socket under pytest's temp folders.
        self.short = Path(f"/run/dw-{uuid.uuid4().hex[:8]}")
        self.short.mkdir()
        self.socket = self.short / "docker.sock"
        log = root / "dockerd.log"
        argv = ["dockerd", "--data-root", str(root / "data"), "--exec-root", str(self.short / "exec"),
                "-H", f"unix://{self.socket}", "--pidfile", str(self.short / "docker.pid"),
                "--iptables=false", "--ip6tables=false", "--bridge=none", "--storage-driver", "overlay2"]
        self.proc = subprocess.Popen(argv, stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True)
        self.base = ["docker", "-H", f"unix://{self.socket}"]
        try:
            _wait(lambda: self.proc.poll() is None and self._ready(), "dockerd", log)
        except Unavailable:
            self.close()
            raise

    def _ready(self) -> bool:
        return subprocess.run([*self.base, "version"], capture_output=True, check=False).returncode == 0

    def load(self, tar: Path) -> None:
        _run([*self.base, "import", str(tar), self.ref])

    def run(self, name: str, model: str, env: dict[str, str], *, shm: int | None = None, cpus: float | None = None) -> int:
        flags = [f"--shm-size={shm}b" if shm else "", f"--cpus={cpus}" if cpus else ""]
        envs = [f"--env={k}={v}" for k, v in env.items()]
        _run([*self.base, "run", "-d", "--name", name, "--network", "none", *filter(None, flags), *envs, self.ref,
              *SERVER, "--model-path", model, "--tp", "8", "--port", "30000"])
        return wait_started(model)

    def remove(self, name: str) -> None:
        _run([*self.base, "rm", "-f", name])

    def close(self) -> None:
        if self.proc.poll() is None:
            ids = subprocess.run([*self.base, "ps", "-aq"], capture_output=True, text=True, check=False).stdout.split()
            if ids:
                subprocess.run([*self.base, "rm", "-f", *ids], capture_output=True, check=False)
        _stop(self.proc)
        shutil.rmtree(self.short, ignore_errors=True)


class Containerd(Runtime):
    """containerd and ``ctr -n k8s.io``: each container is a pod's (its own pod uid and name)."""

    name = "containerd"
    ref = "docker.io/lmsysorg/sglang:latest"

    def __init__(self, root: Path) -> None:
        _need("containerd", "ctr", "runc", "containerd-shim-runc-v2")
        self.short = Path(f"/run/dw-{uuid.uuid4().hex[:8]}")
        self.short.mkdir()
        self.socket = self.short / "containerd.sock"
        config = root / "config.toml"
        config.write_text(f'version = 2\nroot = "{root}/root"\nstate = "{self.short}/state"\n'
                          'disabled_plugins = ["io.containerd.grpc.v1.cri"]\n'
                          f'[grpc]\n  address = "{self.socket}"\n')
        log = root / "containerd.log"
        self.proc = subprocess.Popen(["containerd", "--config", str(config)], stdout=log.open("wb"),
                                     stderr=subprocess.STDOUT, start_new_session=True)
        self.base = ["ctr", "--address", str(self.socket), "-n", "k8s.io"]
        self.ids: dict[str, str] = {}
        try:
            _wait(lambda: self.proc.poll() is None and self._ready(), "containerd", log)
        except Unavailable:
            self.close()
            raise

    def _ready(self) -> bool:
        return subprocess.run([*self.base, "version"], capture_output=True, check=False).returncode == 0

    def load(self, tar: Path) -> None:
        _run([*self.base, "images", "import", str(tar)])

    def run(self, name: str, model: str, env: dict[str, str], *, shm: int | None = None, cpus: float | None = None) -> int:
        cid = uuid.uuid4().hex + uuid.uuid4().hex  # a new container id per start, as the kubelet makes
        pod_uid = str(uuid.uuid5(uuid.NAMESPACE_DNS, name))
        self.ids[name] = cid
        labels = {"io.kubernetes.pod.name": name, "io.kubernetes.pod.namespace": "inference",
                  "io.kubernetes.container.name": "server", "io.kubernetes.pod.uid": pod_uid}
        annotations = {"io.kubernetes.cri.container-type": "container", "io.kubernetes.cri.container-name": "server",
                       "io.kubernetes.cri.sandbox-name": name, "io.kubernetes.cri.sandbox-namespace": "inference",
                       "io.kubernetes.cri.sandbox-uid": pod_uid, "io.kubernetes.cri.image-name": self.ref}
        flags = [f"--cpus={cpus}" if cpus else "",
                 f"--mount=type=tmpfs,src=tmpfs,dst=/dev/shm,options=nosuid:nodev:size={shm}" if shm else ""]
        _run([*self.base, "run", "-d", "--cgroup", f"/kubepods/besteffort/pod{pod_uid}/{cid}",
              *(f"--label={k}={v}" for k, v in labels.items()), *(f"--annotation={k}={v}" for k, v in annotations.items()),
              *(f"--env={k}={v}" for k, v in env.items()), *filter(None, flags), self.ref, cid,
              *SERVER, "--model-path", model, "--tp", "8", "--port", "30000"])
        return wait_started(model)

    def remove(self, name: str) -> None:
        cid = self.ids.pop(name)
        subprocess.run([*self.base, "task", "kill", "-s", "SIGKILL", cid], capture_output=True, check=False)
        deadline = time.monotonic() + 10
        while subprocess.run([*self.base, "task", "rm", cid], capture_output=True, check=False).returncode != 0:
            if time.monotonic() > deadline:
                break
            time.sleep(0.1)
        _run([*self.base, "containers", "rm", cid])

    def close(self) -> None:
        for name in list(self.ids):
            self.remove(name)
        _stop(self.proc)
        shutil.rmtree(self.short, ignore_errors=True)


RUNTIMES = {"podman": Podman, "docker": Docker, "containerd": Containerd}
