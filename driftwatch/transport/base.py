"""The transport interface and the helpers every transport shares."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from collections.abc import Sequence
from typing import Protocol

# Output read back from one command is capped: a runaway log or a hostile host must not
# exhaust the collector's memory. 8 MiB holds `pip`-sized outputs of big environments.
DEFAULT_MAX_OUTPUT = 8 * 1024 * 1024

# Exit statuses of GNU `timeout` when it had to stop the command: 124 after SIGTERM,
# 137 (128 + SIGKILL) when `-k` had to escalate because the command ignored SIGTERM.
TIMEOUT_EXITS = frozenset({124, 137})
# Seconds the target's `timeout` waits after SIGTERM before SIGKILL.
KILL_AFTER = 2
# Extra seconds the collector waits beyond the remote deadline before giving up itself:
# past the SIGKILL escalation, so normally the target reports the timeout itself.
CLIENT_GRACE = KILL_AFTER + 1.0


@dataclass(frozen=True)
class CommandResult:
    """What one command left behind: the same shape for local and remote commands."""

    stdout: bytes
    stderr: bytes
    exit_code: int | None  # None when the collector gave up waiting
    timed_out: bool = False
    truncated: bool = False  # stdout or stderr was cut at the size bound

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    @property
    def text(self) -> str:
        return self.stdout.decode("utf-8", errors="replace")

    @property
    def error_text(self) -> str:
        return self.stderr.decode("utf-8", errors="replace").strip()


class Transport(Protocol):
    """Runs a POSIX shell script on the target with a deadline on both ends."""

    name: str

    def run(
        self,
        script: str,
        *,
        timeout: float,
        stdin: bytes | None = None,
        max_output: int = DEFAULT_MAX_OUTPUT,
    ) -> CommandResult:
        """Run ``script`` with ``sh`` on the target; never blocks longer than ``timeout`` + grace."""
        ...

    def close(self) -> None: ...


# Where a stdlib-only script finds a python3 on the target: the system interpreter first,
# because a pyenv or conda shim first on PATH costs ~60 ms of CPU per start.
DEFAULT_PYTHONS = ("/usr/bin/python3", "python3")


def first_python(code: str, pythons: Sequence[str] = DEFAULT_PYTHONS) -> str:
    """A POSIX sh command running ``code`` as ``python -I -S -c`` with the first of
    ``pythons`` the target has (stdin passes through); exit 127 when it has none.
    -I: no cwd or PYTHON* on sys.path (a stray json.py in $HOME); -S: no site (.pth files)."""
    pythons = list(dict.fromkeys(pythons))
    tried = " ".join(pythons)
    return (
        f"for p in {' '.join(quote_path(p) for p in pythons)}; do "
        f'command -v "$p" >/dev/null && exec "$p" -I -S -c {shlex.quote(code)}; done; '
        f"echo {shlex.quote(f'python3: not found (tried: {tried})')} >&2; exit 127"
    )


def quote_path(path: str) -> str:
    """Shell-quote a path for the target, expanding a leading ``~`` there, not here."""
    if path == "~":
        return '"$HOME"'
    if path.startswith("~/"):
        return '"$HOME"/' + shlex.quote(path[2:])
    return shlex.quote(path)


def bounded_script(script: str, timeout: float) -> str:
    """Wrap ``script`` so the target itself kills it (and its children) at the deadline.

    GNU ``timeout`` puts the command in its own process group and signals the whole group,
    so a hung ``nvidia-smi`` and anything it spawned are gone when the deadline passes, even
    if the collector has vanished. ``-k 2`` follows up with SIGKILL for processes in D state
    that ignore SIGTERM (they die when the kernel lets them). No ``exec``: ``timeout``
    kills its own group on escalation, and the shell around it turns that into exit 137
    (the trailing ``exit $?`` keeps bash and dash from exec-ing ``timeout`` in place).
    """
    seconds = max(1, int(timeout + 0.999))
    return f"timeout -k {KILL_AFTER} {seconds} sh -c {shlex.quote(script)}; exit $?"
