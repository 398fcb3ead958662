"""A throwaway one-node Slurm cluster on this machine, for the health-check recipe's test.

Debian's ``munge``, ``slurmctld`` and ``slurmd`` run as the test's children, in the
foreground, with everything in one temp directory: a munge key and socket, a generated
slurm.conf (no cgroups: proctrack/linuxproc, task/none; SlurmUser=root), state, spool and
logs. The one node is named after this machine (as slurmd names itself) and has its
CPUs. Client commands (``sinfo``, ``scontrol``) find the cluster through ``SLURM_CONF``,
which ``env`` holds.

``start_slurm`` raises :class:`SlurmUnavailable` naming what failed (a binary missing, a
daemon that exited, its last log lines) so the test can skip saying exactly why.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.sshd import free_port

BINARIES = ("munged", "slurmctld", "slurmd", "sinfo", "scontrol")
START_TIMEOUT = 30.0


class SlurmUnavailable(Exception):
    """Slurm cannot run here; the message says what failed."""


@dataclass
class Slurm:
    workdir: Path
    node: str
    conf: Path
    _processes: list[subprocess.Popen[bytes]] = field(default_factory=list, repr=False)

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def run(self, *argv: str) -> str:
        done = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=20, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)}: exit {done.returncode}: {done.stderr.strip()}")
        return done.stdout

    def node_state(self) -> tuple[str, str]:
        """(state, reason) as sinfo shows them: ("idle", "none"), ("drained", "ERROR: ...")."""
        out = self.run("sinfo", "--noheader", "--Node", f"--nodes={self.node}", "--format=%T|%E")
        state, _, reason = out.splitlines()[0].partition("|")
        return state.strip(), reason.strip()

    def logs(self) -> str:
        return "\n".join(
            f"== {path.name}\n{_tail(path)}" for path in sorted((self.workdir / "log").glob("*.log"))
        )

    def stop(self) -> None:
        for process in reversed(self._processes):
            process.terminate()
        for process in reversed(self._processes):
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)
        self._processes.clear()


def missing_binaries() -> list[str]:
    return [name for name in BINARIES if shutil.which(name, path=_sbin_path()) is None]


def start_slurm(workdir: Path, *, slurm_conf_extra: str = "") -> Slurm:
    missing = missing_binaries()
    if missing:
        raise SlurmUnavailable(f"not installed: {', '.join(missing)} (apt-get install slurmctld slurmd slurm-client munge)")
    if os.geteuid() != 0:
        raise SlurmUnavailable("slurmd must run as root to drain and resume its node")
    workdir.mkdir(parents=True, exist_ok=True)
    workdir.chmod(0o755)  # munged wants its socket's folder searchable by everyone
    for sub in ("munge", "state", "spool", "log"):
        (workdir / sub).mkdir(exist_ok=True)
    (workdir / "munge").chmod(0o755)
    key = workdir / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    node = socket.gethostname().split(".")[0]
    slurm = Slurm(workdir=workdir, node=node, conf=workdir / "slurm.conf")
    slurm.conf.write_text(_slurm_conf(workdir, node, slurm_conf_extra))
    try:
        _start(slurm, [
            _which("munged"), "--foreground", "--force", f"--key-file={key}",
            f"--socket={workdir / 'munge' / 'socket'}", f"--pid-file={workdir / 'munge' / 'pid'}",
            f"--log-file={workdir / 'log' / 'munged.log'}", f"--seed-file={workdir / 'munge' / 'seed'}",
        ], ready=lambda: (workdir / "munge" / "socket").exists(), what="munged")
        _start(slurm, [_which("slurmctld"), "-D", "-f", str(slurm.conf)], ready=lambda: _answers(slurm), what="slurmctld")
        _start(slurm, [_which("slurmd"), "-D", "-f", str(slurm.conf), "-N", node],
               ready=lambda: _registered(slurm), what="slurmd")
    except BaseException:
        slurm.stop()
        raise
    return slurm


def _slurm_conf(workdir: Path, node: str, extra: str) -> str:
    munge_socket = workdir / "munge" / "socket"
    return f"""\
ClusterName=driftwatchtest
SlurmctldHost={node}(127.0.0.1)
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
AuthType=auth/munge
AuthInfo=socket={munge_socket}
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation={workdir / "state"}
SlurmdSpoolDir={workdir / "spool"}
SlurmctldPidFile={workdir / "slurmctld.pid"}
SlurmdPidFile={workdir / "slurmd.pid"}
SlurmctldLogFile={workdir / "log" / "slurmctld.log"}
SlurmdLogFile={workdir / "log" / "slurmd.log"}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
ReturnToService=2
{extra}
NodeName={node} NodeAddr=127.0.0.1 CPUs={os.cpu_count() or 1} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


def _start(slurm: Slurm, argv: list[str], *, ready: Callable[[], bool], what: str) -> None:
    process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    slurm._processes.append(process)
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            err = process.stderr.read().decode(errors="replace").strip() if process.stderr else ""
            raise SlurmUnavailable(f"{what} exited with {process.returncode}: {err[-500:]}\n{slurm.logs()}")
        if ready():
            return
        time.sleep(0.2)
    raise SlurmUnavailable(f"{what} did not become ready within {START_TIMEOUT:g}s\n{slurm.logs()}")


def _answers(slurm: Slurm) -> bool:
    try:
        slurm.run("scontrol", "ping")
    except (RuntimeError, subprocess.TimeoutExpired):
        return False
    return True


def _registered(slurm: Slurm) -> bool:
    try:
        state, _ = slurm.node_state()
    except (RuntimeError, subprocess.TimeoutExpired, IndexError):
        return False
    return state in ("idle", "drained", "draining", "mixed", "allocated")


def _which(name: str) -> str:
    found = shutil.which(name, path=_sbin_path())
    assert found is not None
    return found


def _sbin_path() -> str:
    return os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])


def _tail(path: Path, lines: int = 15) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
