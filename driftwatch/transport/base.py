"""The transport interface and the helpers every transport shares."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

# Output read back from one command is capped: a runaway log or a hostile host must not
# exhaust the collector's memory. 8 MiB holds `pip`-sized outputs of big environments.
DEFAULT_MAX_OUTPUT = 8 * 1024 * 1024

# Exit statuses of a command stopped at its deadline, as GNU `timeout -k` has them: 124
# when SIGTERM was enough, 137 (128 + SIGKILL) when something of it ignored SIGTERM.
TIMEOUT_EXITS = frozenset({124, 137})
# Seconds from SIGTERM to SIGKILL for what is left of a command at its deadline: a login
# shell SIGKILLed at once can leave a tool's lock behind.
KILL_AFTER = 2
# Extra seconds the collector waits beyond the remote deadline before giving up itself:
# past the SIGKILL escalation, so normally the target reports the timeout itself.
CLIENT_GRACE = KILL_AFTER + 1.0


@dataclass(frozen=True)
class Survivor:
    """A process of a command still alive after SIGKILL (in D state, nobody can kill it)."""

    pid: int
    state: str  # from /proc/PID/stat: D, or "?" where the target has no /proc
    name: str

    def __str__(self) -> str:
        return f"pid {self.pid} (state {self.state}, {self.name})"


@dataclass(frozen=True)
class CommandResult:
    """What one command left behind: the same shape for local and remote commands."""

    stdout: bytes
    stderr: bytes
    exit_code: int | None  # None when the collector gave up waiting
    timed_out: bool = False
    truncated: bool = False  # stdout or stderr was cut at the size bound
    interrupted: bool = False  # the transport was closed while it ran
    survivors: tuple[Survivor, ...] = ()  # still alive after the SIGKILL at its deadline

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    @property
    def text(self) -> str:
        return self.stdout.decode("utf-8", errors="replace")

    @property
    def error_text(self) -> str:
        return self.stderr.decode("utf-8", errors="replace").strip()


def interrupted_result(where: str) -> CommandResult:
    """The answer to a run() that close() cut short, or that came after it."""
    return CommandResult(b"", f"interrupted: the transport to {where} was closed\n".encode(), None, interrupted=True)


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
        python: str | None = None,
    ) -> CommandResult:
        """Run ``script`` with ``sh`` on the target; never blocks longer than ``timeout`` + grace.

        At the deadline everything the script started gets SIGTERM, and SIGKILL
        ``KILL_AFTER`` seconds later if anything of it is left. ``python``, when given, is
        the stdlib code that ``script`` runs as ``python3 -I -S -c`` (``first_python``):
        a transport with a Python process on the target already (the SSH agent) may run it
        there instead of starting an interpreter; the others ignore it."""
        ...

    def close(self) -> None:
        """Stop every command still running; safe to call twice and while run() is in
        flight, from any thread: each such run() returns promptly, ``interrupted``."""
        ...

    @property
    def reached(self) -> bool:
        """Whether any command has run on the target (started, whatever it did next): a
        host whose every command failed to start was never read."""
        ...


# Where a stdlib-only script finds a python3 on the target: the system interpreter first,
# because a pyenv or conda shim first on PATH costs ~60 ms of CPU per start.
DEFAULT_PYTHONS = ("/usr/bin/python3", "python3")


def first_python(
    code: str, pythons: Sequence[str] = DEFAULT_PYTHONS, args: Sequence[str] = (), *, site: bool = False
) -> str:
    """A POSIX sh command running ``code`` as ``python -I -S -c`` (with ``args`` in
    sys.argv[1:]) under the first of ``pythons`` the target has (stdin passes through);
    exit 127 when it has none.
    -I: no cwd or PYTHON* on sys.path (a stray json.py in $HOME); -S: no site (.pth files).
    ``site``: keep the interpreter's site-packages (-I only), for code that uses what the
    host installed (numpy) where it is there."""
    flags = "-I" if site else "-I -S"
    pythons = list(dict.fromkeys(pythons))
    tried = " ".join(pythons)
    argv = "".join(" " + shlex.quote(arg) for arg in args)
    return (
        f"for p in {' '.join(quote_path(p) for p in pythons)}; do "
        f'command -v "$p" >/dev/null && exec "$p" {flags} -c {shlex.quote(code)}{argv}; done; '
        f"echo {shlex.quote(f'python3: not found (tried: {tried})')} >&2; exit 127"
    )


def quote_path(path: str) -> str:
    """Shell-quote a path for the target, expanding a leading ``~`` there, not here."""
    if path == "~":
        return '"$HOME"'
    if path.startswith("~/"):
        return '"$HOME"/' + shlex.quote(path[2:])
    return shlex.quote(path)
