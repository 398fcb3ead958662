"""Client side of scripts/agent.py: one remote process runs every command of a connection.

Every session channel makes sshd start the user's shell, which on GPU hosts sources a slow
~/.bashrc (conda, pyenv init). The agent is one python3 on one channel running commands as
its children, answering by id in JSON lines: the shell starts once per connection.
"""

from __future__ import annotations

import base64
import binascii
import itertools
import json
import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from importlib import resources

import paramiko

from driftwatch.transport.base import (
    DEFAULT_PYTHONS,
    CommandResult,
    Survivor,
    first_python,
)
from driftwatch.transport import wire
from driftwatch.transport.login import PROFILE_LINES, login_command

# The agent's remote lifetime. Near its end the client starts a fresh one for new commands,
# early enough that no command given to the old one can outlive it.
AGENT_LIFETIME = 900.0
_EXPIRY_MARGIN = 30.0
# DEFAULT_PYTHONS: any python3 >= 3.6 will do; with none, the transport falls back to channels.
__all__ = ["AGENT_LIFETIME", "DEFAULT_PYTHONS", "Agent", "AgentUnavailable", "agent_command"]
_TICK = 0.5  # how late the reader notices stderr and the sender its deadline
# Of a line that has not ended before the hello (a profile printing without a newline),
# only this much is kept: the hello and the launch mark end such a line, and are short.
_BEFORE_HELLO = 4096
_CHUNK = 65536
_ChannelErrors = (paramiko.SSHException, OSError, EOFError)


class AgentUnavailable(Exception):
    """The agent did not start (no python3 on the target, a shell that prints instead).
    ``shell_hung``: the login shell never ran the launch line within the wait (its profile
    blocks): every session of this user would block the same way, so channels would too."""

    def __init__(self, message: str, *, shell_hung: bool = False) -> None:
        super().__init__(message)
        self.shell_hung = shell_hung


def launched_mark(nonce: str) -> str:
    """The line the launch prints once the login shell has run it (the profile is done)."""
    return f"driftwatch-launched {nonce}"


def agent_command(pythons: Sequence[str], lifetime: float, nonce: str) -> str:
    """The agent under the first of ``pythons`` the target has (``first_python``: -I -S),
    told its lifetime and the nonce its hello must carry, as one line any login shell
    runs (login.py). No `timeout` around it: the agent bounds itself and its commands."""
    code = (resources.files("driftwatch") / "transport" / "scripts" / "agent.py").read_text(encoding="utf-8")
    launched = f"echo {launched_mark(nonce)}; "
    return login_command(launched + first_python(code, pythons, args=[str(int(lifetime)), nonce]))


def find_hello(line: bytes, nonce: str) -> int | None:
    """The agent's pid, if ``line`` holds its hello with ``nonce``, anywhere in it: a
    profile's output without a newline (an xterm title) comes first on the same line, and
    a profile may print a hello of its own, which the nonce tells apart."""
    decoder = json.JSONDecoder()
    at = line.find(b'{"hello"')
    while at >= 0:
        try:
            message, _ = decoder.raw_decode(line[at:].decode("utf-8", "replace"))
        except ValueError:
            message = None
        if isinstance(message, dict) and message.get("hello") == 1 and message.get("nonce") == nonce:
            pid = message.get("pid")
            if isinstance(pid, int) and not isinstance(pid, bool):
                return pid
        at = line.find(b'{"hello"', at + 1)
    return None


def line_bound(max_output: int) -> int:
    """Longest answer to accept: stdout and stderr, base64 (4/3 each), and a few fields."""
    return 2 * 4 * (max_output // 3 + 1) + 64 * 1024


class Agent:
    """The agent process on one session channel; :meth:`run` is safe from many threads."""

    def __init__(self, channel: paramiko.Channel, transport: paramiko.Transport, address: str) -> None:
        self._channel, self._transport, self._address = channel, transport, address
        self._who = f"driftwatch agent on {address}"
        self.expires_at = time.monotonic() + AGENT_LIFETIME - _EXPIRY_MARGIN
        self.pid: int | None = None  # on the target, from its hello
        self.nonce = os.urandom(8).hex()  # what its hello must carry: no profile can guess it
        self._hello = threading.Event()
        self._send_lock = threading.Lock()
        self._lock = threading.Lock()  # guards everything below
        self._pending: dict[int, tuple[Future[CommandResult], int]] = {}  # id: (waiter, max_output)
        self._ids = itertools.count(1)
        self._line_limit = line_bound(0)
        self._dead: str | None = None  # why it takes no more commands
        self._stderr = b""  # its last words, for the reason it failed
        self._launched = False  # the login shell ran the launch line (launched_mark)
        self._launched_line = launched_mark(self.nonce).encode()

    @classmethod
    def start(cls, transport: paramiko.Transport, *, address: str, pythons: Sequence[str], wait: float) -> Agent:
        """Start the agent and wait for its hello; AgentUnavailable when it does not say it."""
        try:
            channel = transport.open_session(timeout=wait)
        except _ChannelErrors as exc:
            raise AgentUnavailable(f"cannot start it: {exc or type(exc).__name__}") from exc
        agent = cls(channel, transport, address)
        try:
            channel.exec_command(agent_command(pythons, AGENT_LIFETIME, agent.nonce))
            channel.settimeout(_TICK)
            # Blank lines for a profile that reads stdin to take; requests go only after the hello.
            _send_all(channel, b"\n" * PROFILE_LINES)
        except _ChannelErrors as exc:
            agent.close()
            raise AgentUnavailable(f"cannot start it: {exc or type(exc).__name__}") from exc
        threading.Thread(target=agent._read, name=agent._who, daemon=True).start()
        if agent._hello.wait(wait) and agent.pid is not None:
            return agent
        hung = not agent._dead and not agent._launched
        why = ("it exited" if agent._dead else f"no hello within {wait:g}s" if agent._launched
               else f"the login shell did not start within {wait:g}s (a profile that waits on something?)")
        wire.kill_session(channel)  # the shell, or an interpreter that never said hello: not left behind
        agent.close()
        raise AgentUnavailable(why + agent._last_words(), shell_hung=hung)

    @property
    def alive(self) -> bool:
        return self._dead is None

    def usable_for(self, seconds: float) -> bool:
        return self._dead is None and time.monotonic() + seconds < self.expires_at

    def run(
        self, script: str, *, timeout: float, stdin: bytes | None, max_output: int, deadline: float,
        python: str | None = None,
    ) -> CommandResult:
        """Run ``script`` (killed on the target after ``timeout``); give up at ``deadline``.
        With ``python``, the code ``script`` runs as ``python3 -I -S -c``: the agent runs it
        in a fork of itself, one interpreter start fewer."""
        request_id = next(self._ids)
        request = {
            "id": request_id,
            "script": script,
            "stdin": None if stdin is None else base64.b64encode(stdin).decode("ascii"),
            "timeout": timeout,
            "max_output": max_output,
        }
        if python is not None:
            request["python"] = python
        future: Future[CommandResult] = Future()
        with self._lock:
            if self._dead is not None:
                return _error(self._dead)
            self._pending[request_id] = (future, max_output)
            self._line_limit = max(self._line_limit, line_bound(max_output))
        try:
            self._send(json.dumps(request).encode("ascii") + b"\n", deadline)
            return future.result(timeout=max(deadline - time.monotonic(), 0.0))
        except FutureTimeout:
            return CommandResult(b"", b"", None, timed_out=True)
        finally:
            with self._lock:
                self._pending.pop(request_id, None)

    def close(self) -> None:
        self._fail(f"connection to {self._address} closed")

    def _send(self, data: bytes, deadline: float) -> None:
        if not self._send_lock.acquire(timeout=max(deadline - time.monotonic(), 0.0)):
            return  # the caller's wait for its answer times out at once
        try:
            sent = 0
            while sent < len(data) and self._dead is None:
                if time.monotonic() >= deadline:  # half a line is out: nothing after it parses
                    return self._fail(f"{self._who}: request not sent in time")
                try:
                    sent += wire.send(self._channel, data[sent : sent + _CHUNK])
                except TimeoutError:  # no window: the agent is stalled, or we are
                    pass
        except _ChannelErrors:
            self._fail(self._lost_reason())
        finally:
            self._send_lock.release()

    def _read(self) -> None:
        buffer, scanned, reason = bytearray(), 0, None
        try:
            while reason is None:
                try:
                    chunk = self._channel.recv(_CHUNK)
                except TimeoutError:
                    chunk = None
                while self._channel.recv_stderr_ready():  # unread, it would stall the window
                    self._stderr = (self._stderr + self._channel.recv_stderr(_CHUNK))[-2048:]
                if chunk == b"":  # before the hello nobody waits for a reason: skip the check
                    reason = self._dead or (self._lost_reason() if self.pid is not None else "exited")
                buffer += chunk or b""
                while reason is None and (end := buffer.find(b"\n", scanned)) >= 0:
                    line = bytes(buffer[:end])
                    del buffer[: end + 1]
                    scanned = 0
                    reason = self._dispatch(line)
                if self.pid is None and len(buffer) > _BEFORE_HELLO:
                    del buffer[:-_BEFORE_HELLO]  # a profile's megabyte banner: only its end can hold the hello
                scanned = len(buffer)  # only new bytes can hold the next newline
                if reason is None and scanned > self._line_limit:
                    reason = f"{self._who}: protocol error: a line over {self._line_limit} bytes"
        except _ChannelErrors:
            reason = self._lost_reason()
        self._fail(reason)

    def _dispatch(self, line: bytes) -> str | None:
        """Hand one answer to its caller; a reason to give up on the agent, or None."""
        if self.pid is None:  # lines before the hello are a chatty ~/.bashrc's
            if line.endswith(self._launched_line):
                self._launched = True
                return None
            self.pid = find_hello(line, self.nonce)
            if self.pid is not None:
                self._hello.set()
            return None
        try:
            message = json.loads(line)
        except ValueError:
            message = None
        request_id = message.get("id") if isinstance(message, dict) else None
        if not isinstance(request_id, int):
            return f"{self._who}: protocol error: unexpected line {line[:80]!r}"
        with self._lock:
            future, max_output = self._pending.pop(request_id, (None, 0))
        if future is not None:  # else its caller gave up already
            try:
                future.set_result(_result(message, max_output))
            except (KeyError, TypeError, ValueError, binascii.Error) as exc:
                future.set_result(_error(f"{self._who}: bad answer ({exc})"))
        return None

    def _last_words(self) -> str:
        tail = self._stderr.decode(errors="replace").strip().splitlines()[-1:]
        return f": {tail[0]}" if tail else ""

    def _lost_reason(self) -> str:
        self._transport.join(0.5)  # a dying transport closes channels before it goes inactive
        if not self._transport.is_active():
            return f"connection to {self._address} lost"
        return f"{self._who} exited{self._last_words()}"

    def _fail(self, reason: str | None) -> None:
        with self._lock:
            self._dead = self._dead or reason or f"{self._who} stopped"
            waiters, self._pending = list(self._pending.values()), {}
        self._hello.set()  # wakes start(); pid stays None without a hello
        for future, _ in waiters:
            future.set_result(_error(self._dead))
        try:
            self._channel.close()
        except _ChannelErrors:
            pass  # on a dead connection there is nobody to tell


def _send_all(channel: paramiko.Channel, data: bytes) -> None:
    """``channel.sendall``, each piece sent before the channel's close (wire.py)."""
    while data:
        sent = wire.send(channel, data)
        if sent == 0:
            raise EOFError("channel closed for sending")
        data = data[sent:]


def _result(message: dict, max_output: int) -> CommandResult:
    if message.get("error") is not None:
        return _error(str(message["error"]))
    rc = message["rc"]
    if rc is not None and not isinstance(rc, int):
        raise TypeError(f"rc {rc!r}")
    # The agent keeps to max_output; a target that does not is cut here all the same.
    out, err = (base64.b64decode(message[key], validate=True) for key in ("stdout", "stderr"))
    truncated = bool(message.get("truncated")) or max(len(out), len(err)) > max_output
    if message.get("interrupted"):  # SIGTERM or its lifetime's end; our own close() never waits for this
        return _error("driftwatch agent: stopped before the command ended (the agent is exiting)")
    survivors = tuple(Survivor(int(pid), str(state), str(name)) for pid, state, name in message.get("survivors", ()))
    timed_out = bool(message.get("timed_out")) or rc is None
    return CommandResult(
        out[:max_output], err[:max_output], rc, timed_out=timed_out, truncated=truncated, survivors=survivors
    )


def _error(reason: str) -> CommandResult:
    return CommandResult(b"", reason.encode() + b"\n", None)
