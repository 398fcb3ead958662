"""One command on an SSH session channel of its own: for a target without the agent.

The command runs under scripts/bounded.sh (its deadline on the target, what outlives
SIGKILL), sent as one line any login shell runs (login.py). What the login shell's
profile does around it is kept out of the command's input and output:

- **stdin**: a few blank lines and the command's random mark go ahead of its input; a
  profile that reads stdin (``read line``) takes blank lines, and bounded.sh skips what is
  left of them up to the mark.
- **stdout**: bounded.sh prints the mark before anything of the command. What comes
  before it is the profile's (an xterm title printed without a newline would glue itself
  to the command's first line otherwise), and an output without it is an error: the
  command never started, whatever the shell printed or whichever exit status it gave.
"""

from __future__ import annotations

import contextlib
import dataclasses
import select
import shlex
import time
from functools import cache
from importlib import resources

import paramiko

from driftwatch.transport import wire
from driftwatch.transport.base import KILL_AFTER, CommandResult, Survivor
from driftwatch.transport.bounded import BoundedBuffer
from driftwatch.transport.login import PROFILE_LINES, login_command

_CHUNK = 65536
# select() wakes on output and on close; these caps only bound how late we notice the rest
# (exit status without close, window space for stdin, the deadline).
_IDLE_WAIT = 0.5
_STDIN_WAIT = 0.02
# Room for a profile's output ahead of the start mark, beyond the command's own bound.
PROFILE_OUTPUT = 64 * 1024
_ChannelErrors = (paramiko.SSHException, OSError, EOFError)


@cache
def _bounded_sh() -> str:
    return (resources.files("driftwatch") / "transport" / "scripts" / "bounded.sh").read_text(encoding="utf-8")


def bounded_command(script: str, timeout: float, mark: str) -> str:
    """The command for a channel of its own: ``script`` under scripts/bounded.sh, which
    stops all of it at the deadline, prints ``mark`` first and lists what outlives SIGKILL
    behind it."""
    seconds = max(1, int(timeout + 0.999))  # `timeout 0` would mean no deadline at all
    arguments = " ".join(shlex.quote(word) for word in (script, str(seconds), str(KILL_AFTER), mark))
    return login_command(f"set -- {arguments}\n{_bounded_sh()}")


def channel_stdin(stdin: bytes | None, mark: str) -> bytes:
    """What the channel is sent: blank lines a profile may read, the mark, the command's input."""
    return b"\n" * PROFILE_LINES + mark.encode() + b"\n" + (stdin or b"")


def output_buffer(max_output: int) -> BoundedBuffer:
    return BoundedBuffer(max_output + PROFILE_OUTPUT)


def has_started(result: CommandResult, mark: str) -> bool:
    """Whether the command's start mark came: the host ran it, whatever it did next."""
    return mark.encode() + b"\n" in result.stdout


def started(result: CommandResult, mark: str, max_output: int, where: str) -> CommandResult:
    """``result`` without what came before the start mark; an error when the mark is missing
    (a timed-out command that never started stays a timeout)."""
    head = mark.encode() + b"\n"
    at = result.stdout.find(head)
    if at < 0:
        if result.timed_out or result.exit_code is None:
            return dataclasses.replace(result, stdout=b"")
        said = result.error_text.splitlines()[-1:]
        note = f"the command did not start on {where}: no start mark in its output"
        note += f" (the login shell said: {said[0][:200]})" if said else " (a login shell or profile in the way?)"
        text = result.stderr if result.stderr.endswith(b"\n") or not result.stderr else result.stderr + b"\n"
        return CommandResult(b"", text + note.encode() + b"\n", None, truncated=result.truncated)
    out = result.stdout[at + len(head) :]
    truncated = result.truncated or len(out) > max_output
    return dataclasses.replace(result, stdout=out[:max_output], truncated=truncated)


def with_survivors(result: CommandResult, mark: str) -> CommandResult:
    """Move bounded.sh's ``mark PID STATE NAME`` lines out of stderr into ``survivors``."""
    prefix = mark.encode() + b" "
    if prefix not in result.stderr:
        return result
    kept, survivors = [], []
    for line in result.stderr.splitlines(keepends=True):
        fields = line.rstrip(b"\n").split(b" ", 3)
        if line.startswith(prefix) and len(fields) == 4 and fields[1].isdigit():
            survivors.append(Survivor(int(fields[1]), fields[2].decode(errors="replace"), fields[3].decode(errors="replace")))
        else:
            kept.append(line)
    return dataclasses.replace(result, stderr=b"".join(kept), survivors=tuple(survivors))


def pump(channel: paramiko.Channel, stdin: bytes, out: BoundedBuffer, err: BoundedBuffer, deadline: float) -> bool:
    """Feed stdin and drain output until the exit status; False when the deadline passed first.

    stdin is sent in window-sized pieces between reads, never with a blocking sendall: a
    command that writes a lot before reading its input would otherwise deadlock with us.
    """
    sent = 0
    # Data precedes exit-status on the wire, so once the status is in, all output is buffered.
    while not (channel.exit_status_ready() and not channel.recv_ready() and not channel.recv_stderr_ready()):
        if channel.recv_ready():
            out.feed(channel.recv(_CHUNK))
        if channel.recv_stderr_ready():
            err.feed(channel.recv_stderr(_CHUNK))
        if sent < len(stdin) and channel.send_ready():
            try:
                sent += wire.send(channel, stdin[sent : sent + _CHUNK])
            except OSError:  # the command closed its stdin or exited: the rest is not wanted
                sent = len(stdin)
            if sent == len(stdin):
                with contextlib.suppress(*_ChannelErrors):
                    wire.shutdown_write(channel)
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        select.select([channel], [], [], min(left, _STDIN_WAIT if sent < len(stdin) else _IDLE_WAIT))
    return True
