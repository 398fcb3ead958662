"""Shared set-up for the benchmarks that need an SSH peer: the test suite's throwaway
OpenSSH sshd (tests/sshd.py), relaunched with a bench-specific sshd_config.

What the bench changes against the test fixture, and why:

* Sessions get a private ``HOME`` (sshd ``SetEnv HOME=...``) holding a ``.bashrc`` the
  bench writes: empty by default, or one that sleeps ``rc_sleep`` seconds (a slow conda /
  pyenv start-up file, as on many real GPU hosts). Without this every session would source
  the developer machine's own ``~/.bashrc``, whose ``pyenv init`` rehash takes one
  machine-wide lock: many concurrent sessions (a 128-host fleet on one sshd) then queue on
  it, and a stale lock left by a killed shell makes *every* session wait 60 s. Neither
  happens on a real fleet, where each host has its own home.
* ``MaxStartups`` / ``MaxSessions`` can be raised (the fleet bench opens up to 32
  connections at once against one sshd).
* Extra ``Host`` aliases (``h001`` ...) in the client ssh config all reach the same sshd.
"""

from __future__ import annotations

import compileall
import os
import re
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.sshd import Sshd, _wait_ready, find_sshd, start_sshd

__all__ = ["ROOT", "Sshd", "Timing", "precompile", "start_bench_sshd", "timed", "write_aliases"]


def precompile() -> None:
    """Byte-compile driftwatch, as installing a package does (pip writes its .pyc files).
    An editable checkout under PYTHONDONTWRITEBYTECODE, which these machines set, would
    otherwise compile every module from source on every run: ~25 ms per snapshot."""
    compileall.compile_dir(str(ROOT / "driftwatch"), quiet=1)


def start_bench_sshd(
    workdir: Path,
    *,
    rc_sleep: float = 0.0,
    max_startups: str | None = None,
    max_sessions: int | None = None,
    fake_env: dict[str, str] | None = None,
) -> Sshd:
    """The fixture sshd, restarted on the same port with the bench's sshd_config."""
    sshd = find_sshd()
    if sshd is None:
        raise SystemExit("sshd is not installed (apt-get install openssh-server)")
    server = start_sshd(workdir, sshd)
    server.stop()
    home = workdir / "home"
    home.mkdir(exist_ok=True)
    rc = f"sleep {rc_sleep}\n" if rc_sleep > 0 else ""
    for name in (".bashrc", ".profile", ".bash_profile"):
        (home / name).write_text(rc if name == ".bashrc" else (". ~/.bashrc\n" if name == ".bash_profile" else ""))
    config = workdir / "sshd_config"
    text = config.read_text()
    text = re.sub(r"^SetEnv (.*)$", lambda m: f"SetEnv {m.group(1)} HOME={home}", text, flags=re.MULTILINE)
    if max_startups:
        text = re.sub(r"^MaxStartups .*$", f"MaxStartups {max_startups}", text, flags=re.MULTILINE)
    if max_sessions:
        text = re.sub(r"^MaxSessions .*$", f"MaxSessions {max_sessions}", text, flags=re.MULTILINE)
    config.write_text(text)
    with open(server.log_path, "ab") as log:
        server._process = subprocess.Popen(
            [sshd, "-D", "-e", "-f", str(config)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    error = _wait_ready(server)
    if error:
        server.stop()
        raise SystemExit(f"bench sshd did not start: {error}")
    server.fake_env(**(fake_env or {}))
    return server


def write_aliases(server: Sshd, names: list[str]) -> None:
    """Append ``Host NAME`` aliases to the fixture's ssh config, all reaching ``server``."""
    block = Path(server.ssh_config_path).read_text().split("\nHost jumped")[0]
    body = block.split("\n", 1)[1]  # the indented options under "Host testhost"
    with open(server.ssh_config_path, "a") as config:
        config.writelines(f"\nHost {name}\n{body.rstrip()}\n" for name in names)


@dataclass
class Timing:
    wall: float
    cpu: float  # user + system CPU seconds of the process and everything it waited for
    rc: int
    stdout: bytes
    stderr: bytes
    remote_cpu: float = 0.0  # CPU seconds of what sshd ran for it (sessions, shells, probes)


def _sshd_children_cpu(server: Sshd | None) -> float:
    """CPU seconds of every process the sshd listener has reaped (cutime + cstime): its
    per-connection children, and through them the sessions, shells and probes."""
    if server is None or server._process is None:
        return 0.0
    fields = Path(f"/proc/{server._process.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")


def _wait_sessions_gone(server: Sshd, limit: float = 5.0) -> None:
    """Until sshd has reaped the connections just closed (so their CPU is counted)."""
    assert server._process is not None
    children = Path(f"/proc/{server._process.pid}/task/{server._process.pid}/children")
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline and children.read_text().strip():
        time.sleep(0.01)


def timed(
    argv: list[str],
    *,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    ok: tuple[int, ...] = (0,),
    timeout: float = 600,
    server: Sshd | None = None,
    after_exit: Callable[[], object] | None = None,
) -> Timing:
    """Run ``argv`` as a fresh process; wall time and its CPU time (RUSAGE_CHILDREN delta),
    and with ``server`` the CPU time the loopback host spent serving it. ``after_exit``
    runs once the process has exited, outside the wall time (closing what it left open)."""
    if server is not None:
        _wait_sessions_gone(server)
    remote_before = _sshd_children_cpu(server)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    result = subprocess.run(
        argv, check=False, cwd=cwd, env=env, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL
    )
    wall = time.perf_counter() - started
    if after_exit is not None:
        after_exit()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if result.returncode not in ok:
        tail = (result.stderr or result.stdout).decode(errors="replace")[-1500:]
        raise SystemExit(f"{' '.join(argv[:6])}... exited {result.returncode}:\n{tail}")
    remote = 0.0
    if server is not None:
        _wait_sessions_gone(server)
        remote = _sshd_children_cpu(server) - remote_before
    return Timing(wall, cpu, result.returncode, result.stdout, result.stderr, remote)
