"""Run commands on a remote host over one SSH connection (paramiko).

One connection per host, so probes run in parallel from threads without paying for a
handshake each. Commands go to one agent process on one session channel (see
:mod:`driftwatch.transport.agent`); where it cannot start (no python3 on the target),
every ``run`` opens its own session channel instead (:mod:`driftwatch.transport.channel`).
paramiko, socket and OS errors are translated into :mod:`driftwatch.errors` here and
nowhere else.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import getpass
import hashlib
import importlib
import importlib.util
import itertools
import logging
import os
import random
import socket
import sys
import threading
import time
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass


class _DeferredInvoke:
    """Stands in for the ``invoke`` module until something uses it.

    paramiko.config imports invoke at import time only to run ``Match exec`` lines, and
    that import (it pulls in asyncio and unittest.mock) was ~30 ms of every snapshot's
    start-up, ahead of the connection. ``Match exec`` still works: its first ``invoke.run``
    imports the real module. (importlib's LazyLoader does not help: on Python 3.11 the
    import statement itself reads ``__spec__`` and so loads the module.)
    """

    __spec__ = None

    def __getattr__(self, name: str) -> object:
        if sys.modules.get("invoke") is self:
            del sys.modules["invoke"]
        return getattr(importlib.import_module("invoke"), name)


def _defer_invoke() -> None:
    if "invoke" in sys.modules:
        return
    try:
        installed = importlib.util.find_spec("invoke") is not None
    except (ImportError, ValueError):
        installed = False
    if installed:  # if not, paramiko must see the ImportError it reports for Match exec
        sys.modules["invoke"] = _DeferredInvoke()  # type: ignore[assignment]


_defer_invoke()

import paramiko  # noqa: E402  (after _defer_invoke)

from driftwatch.errors import AuthError, ConnectError, DriftwatchError, HostKeyError, UserError
from driftwatch.transport.agent import AGENT_LIFETIME, DEFAULT_PYTHONS, Agent, AgentUnavailable
from driftwatch.transport.base import (
    CLIENT_GRACE,
    DEFAULT_MAX_OUTPUT,
    TIMEOUT_EXITS,
    CommandResult,
    interrupted_result,
)
from driftwatch.transport.bounded import BoundedBuffer
from driftwatch.transport.channel import (
    bounded_command, channel_stdin, has_started, output_buffer, pump, started, with_survivors,
)

DEFAULT_SSH_CONFIG = "~/.ssh/config"
DEFAULT_KNOWN_HOSTS = "~/.ssh/known_hosts"
SSH_PORT = 22
# OpenSSH allows 10 sessions per connection (MaxSessions). Stay below it: a channel we
# closed at our deadline keeps its server-side slot until the remote command has exited.
MAX_CHANNELS = 8
# Pauses before retrying a server that dropped us at MaxStartups: up to 0.05 s, doubling
# to at most 1 s, each drawn at random below that bound ("full jitter").
RETRY_PAUSE = 0.05
RETRY_PAUSE_CAP = 1.0
# A longer ProxyJump chain is almost surely a loop in the ssh config (`Host *` + ProxyJump).
MAX_JUMPS = 4
# How late a wait for a free channel notices that the transport was closed.
_IDLE_WAIT = 0.5

_ChannelErrors = (paramiko.SSHException, OSError, EOFError)

# paramiko logs every failed handshake at ERROR, with its traceback one record a line. We
# report those failures ourselves, as one line, so its logger is off (above CRITICAL): the
# records are never made, and reach no handler, neither Python's last resort (stderr) nor
# any an application or pytest installs (pytest's reach non-propagating loggers too).
logging.getLogger("paramiko").setLevel(logging.CRITICAL + 1)


@dataclass(frozen=True)
class _Endpoint:
    label: str  # as the user wrote it: an alias or [user@]host[:port]
    host: str  # what we connect to (HostName)
    port: int
    user: str
    key_files: tuple[str, ...]
    known_hosts: tuple[str, ...]  # the first one is where new keys are written
    jump: str | None  # ProxyJump value, comma-separated hops

    @property
    def address(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host  # IPv6
        return f"{self.user}@{host}:{self.port}"

    @property
    def display(self) -> str:
        return self.address if self.label in (self.host, self.address) else f"{self.label} ({self.address})"

    @property
    def host_key_name(self) -> str:
        # The name OpenSSH and paramiko file the key under in known_hosts.
        return self.host if self.port == SSH_PORT else f"[{self.host}]:{self.port}"


@dataclass(frozen=True)
class _Options:
    config: paramiko.SSHConfig
    known_hosts_path: str | None
    accept_new_host_key: bool
    connect_timeout: float


class SshTransport:
    """One SSH connection to a host; commands run on its agent, or each on a new channel."""

    def __init__(
        self,
        clients: list[paramiko.SSHClient],
        *,
        name: str,
        address: str,
        via: str | None,
        use_agent: bool = True,
        agent_python: str | None = None,
        agent_wait: float = 10,
    ) -> None:
        self._clients = clients  # the target's client first, then the jump hosts under it
        self.name = name
        self.address = address
        self.via = via  # address of the ProxyJump host next to the target, if any
        self._slots = threading.BoundedSemaphore(MAX_CHANNELS)
        self._agent_pythons = (agent_python,) if agent_python else DEFAULT_PYTHONS
        self._agent_wait = agent_wait  # for its hello: one shell start, like a connect
        self._agent_lock = threading.Lock()
        # Resolves to the agent, or to None: run commands on channels for good.
        self._agent: Future[Agent | None] | None = None if use_agent else _resolved(None)
        self._retired: list[Agent] = []  # replaced near their end, maybe still answering
        self._closed = False
        self.agent_error: str | None = None  # why commands run on channels, if they do
        # The agent's login shell never ran its launch line: a profile blocks every session
        # of this user, so a channel per command would only leave one more shell hung there.
        self._shell_hung = False
        self._reached = False  # a command of ours has run on the host (see ``reached``)

    @classmethod
    def connect(
        cls,
        destination: str,
        *,
        connect_timeout: float = 10,
        ssh_config_path: str | None = None,
        known_hosts_path: str | None = None,
        accept_new_host_key: bool = False,
        port: int | None = None,
        user: str | None = None,
        key_filename: str | None = None,
        use_agent: bool = True,
        agent_python: str | None = None,
    ) -> SshTransport:
        """Connect to ``[user@]host[:port]`` or an ssh config alias.

        Explicit arguments beat the destination string, which beats the ssh config.
        Raises ConnectError, AuthError, HostKeyError, or UserError for bad input.
        ``use_agent=False`` runs every command on its own channel; ``agent_python`` is
        the target's interpreter for the agent (default: /usr/bin/python3, else python3).
        """
        options = _Options(_load_config(ssh_config_path), known_hosts_path, accept_new_host_key, connect_timeout)
        target = _resolve(destination, options, port=port, user=user, key_filename=key_filename)
        chain = _open_chain(target, options, depth=0)
        via = chain[1][1].address if len(chain) > 1 else None
        return cls(
            [client for client, _ in chain],
            name=destination,
            address=target.address,
            via=via,
            use_agent=use_agent,
            agent_python=agent_python,
            agent_wait=connect_timeout,
        )

    def run(
        self,
        script: str,
        *,
        timeout: float,
        stdin: bytes | None = None,
        max_output: int = DEFAULT_MAX_OUTPUT,
        python: str | None = None,
    ) -> CommandResult:
        result = self._run(script, timeout, stdin, max_output, python)
        if self._closed and result.exit_code is None:  # cut short by close(): not the host's doing
            return interrupted_result(self.address)
        return result

    def _run(
        self, script: str, timeout: float, stdin: bytes | None, max_output: int, python: str | None
    ) -> CommandResult:
        deadline = time.monotonic() + timeout + CLIENT_GRACE
        out, err = BoundedBuffer(max_output), BoundedBuffer(max_output)
        try:
            agent = self._agent_for(timeout + CLIENT_GRACE, deadline)
        except FutureTimeout:
            return _failed(out, err, f"no command agent on {self.address} within {timeout:g}s", timed_out=True)
        if self._closed:
            return interrupted_result(self.address)
        if agent is None and self._shell_hung:
            return _failed(out, err, f"not run: {self.agent_error}; a session of its own would wait the same way")
        if agent is not None:
            self._reached = True  # its hello came from a python on the host
            remote_timeout = max(deadline - CLIENT_GRACE - time.monotonic(), 0.0)
            return agent.run(
                script, timeout=remote_timeout, stdin=stdin, max_output=max_output, deadline=deadline, python=python
            )
        # Waiting for a free channel counts against the deadline: callers rely on run()
        # returning within timeout + grace however many probes share the connection.
        if not self._take_slot(time.monotonic() + max(timeout, 0.0)):
            return _failed(out, err, f"no free SSH channel on {self.address} within {timeout:g}s", timed_out=True)
        try:
            remote_timeout = max(deadline - CLIENT_GRACE - time.monotonic(), 0.0)
            mark = os.urandom(8).hex()
            result = self._run_channel(
                bounded_command(script, remote_timeout, mark), channel_stdin(stdin, mark),
                output_buffer(max_output), err, deadline,
            )
            self._reached = self._reached or has_started(result, mark)
            return with_survivors(started(result, mark, max_output, self.address), mark)
        finally:
            self._slots.release()

    def _take_slot(self, until: float) -> bool:
        """A free channel slot before ``until``; False at once when the transport is closed."""
        while not self._closed:
            if self._slots.acquire(timeout=min(max(until - time.monotonic(), 0.0), _IDLE_WAIT)):
                if not self._closed:
                    return True
                self._slots.release()
            elif time.monotonic() >= until:
                return False
        return False

    def prepare(self) -> None:
        """Start the command agent now, without waiting for it: it comes up (one login
        shell on the target) while the collector loads the previous snapshot."""
        with self._agent_lock:
            if self._agent is None and not self._closed:
                self._agent = Future()
                threading.Thread(target=self._start_agent, args=(self._agent,), daemon=True).start()

    @property
    def reached(self) -> bool:
        """Whether any command of ours has run on the host. False after commands that all
        failed to start (a profile that exits, a shell that is not one): the host was
        connected to, never read."""
        return self._reached

    @property
    def mode(self) -> str:
        """``agent`` or ``channels`` once decided (by the first command); else ``undecided``."""
        future = self._agent
        if future is None or not future.done():
            return "undecided"
        return "channels" if future.result() is None else "agent"

    def close(self) -> None:
        """Close the connection. Commands on the agent are stopped on the target (the
        agent reads EOF and stops them all: SIGTERM, SIGKILL after KILL_AFTER); commands on
        channels of their own run on to their own deadline there. Every run() in flight
        returns at once, ``interrupted``; safe to call twice, from any thread."""
        with self._agent_lock:
            self._closed = True
            future, self._agent = self._agent, _resolved(None)
            agents, self._retired = self._retired, []
            if future is not None and not future.done():
                future.set_result(None)  # its waiters go on to find the transport closed
        if future is not None and future.result() is not None:
            agents.append(future.result())  # type: ignore[arg-type]  # checked just above
        for agent in agents:
            agent.close()
        with self._agent_lock:
            clients, self._clients = self._clients, []
        for client in clients:
            client.close()

    def __enter__(self) -> SshTransport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _agent_for(self, needed: float, deadline: float) -> Agent | None:
        """The agent to run a command of ``needed`` seconds on; None: use a channel.

        Starts it on first use, in a thread, so that callers wait only until their own
        deadline (FutureTimeout) and the start is not cut short by one caller's timeout.
        """
        if needed > AGENT_LIFETIME / 2:  # outlives an agent: it gets a channel of its own
            return None
        with self._agent_lock:
            future = self._agent
            agent = future.result() if future is not None and future.done() else None
            if future is None or (agent is not None and not agent.usable_for(needed)):
                if agent is not None and not agent.alive:
                    # It died under us (or the connection did): channels are known to work.
                    self.agent_error = f"command agent on {self.address} stopped"
                    future = self._agent = _resolved(None)
                else:
                    if agent is not None:  # near its end: it finishes what it has, then dies
                        self._retired = [old for old in self._retired if old.alive] + [agent]
                    future = self._agent = Future()
                    threading.Thread(target=self._start_agent, args=(future,), daemon=True).start()
        return future.result(timeout=max(deadline - CLIENT_GRACE - time.monotonic(), 0.0))

    def _start_agent(self, future: Future[Agent | None]) -> None:
        clients = self._clients
        transport = clients[0].get_transport() if clients else None
        agent: Agent | None = None
        try:
            if transport is None or not transport.is_active():
                raise EOFError("connection closed")
            agent = Agent.start(transport, address=self.address, pythons=self._agent_pythons, wait=self._agent_wait)
        except Exception as exc:  # noqa: BLE001  # whatever went wrong, channels remain
            self.agent_error = f"command agent unavailable on {self.address}: {_reason(exc)}"
            self._shell_hung = isinstance(exc, AgentUnavailable) and exc.shell_hung
        with self._agent_lock:
            keep = None if self._closed else agent
            if not future.done():  # else close() has resolved it already
                future.set_result(keep)
        if agent is not None and keep is None:
            agent.close()

    def _run_channel(
        self, command: str, stdin: bytes, out: BoundedBuffer, err: BoundedBuffer, deadline: float
    ) -> CommandResult:
        clients = self._clients  # one read: close() may empty it from another thread
        transport = clients[0].get_transport() if clients else None
        if transport is None or not transport.is_active():
            return _failed(out, err, f"connection to {self.address} is closed")
        try:
            channel = transport.open_session(timeout=max(deadline - time.monotonic(), 0.1))
        except _ChannelErrors as exc:
            return _failed(out, err, f"cannot open an SSH session on {self.address}: {_reason(exc)}")
        try:
            channel.exec_command(command)
            if not pump(channel, stdin, out, err, deadline):
                return CommandResult(
                    out.getvalue(), err.getvalue(), None, timed_out=True, truncated=out.truncated or err.truncated
                )
            code = channel.recv_exit_status()  # ready: _pump saw it
        except _ChannelErrors as exc:
            return _failed(out, err, f"connection to {self.address} lost: {_reason(exc)}")
        finally:
            # Closing is best effort: on a dead connection there is nobody to tell.
            with contextlib.suppress(*_ChannelErrors):
                channel.close()
        if code < 0:  # paramiko's "no exit-status": the channel closed without one
            # A dying transport closes its channels just before it clears is_active(): give
            # its thread a moment to finish (a live one costs this wait only on this rare path).
            transport.join(0.5)
            if not transport.is_active():
                return _failed(out, err, f"connection to {self.address} lost")
            return _failed(out, err, "remote command ended without an exit status (killed by a signal?)")
        return CommandResult(
            out.getvalue(),
            err.getvalue(),
            code,
            timed_out=code in TIMEOUT_EXITS,
            truncated=out.truncated or err.truncated,
        )


def _resolved(value: Agent | None) -> Future[Agent | None]:
    future: Future[Agent | None] = Future()
    future.set_result(value)
    return future


def _failed(out: BoundedBuffer, err: BoundedBuffer, note: str, *, timed_out: bool = False) -> CommandResult:
    # A failed command is a result, not an exception: other probes on the connection go on.
    text = err.getvalue()
    if text and not text.endswith(b"\n"):
        text += b"\n"
    return CommandResult(
        out.getvalue(),
        text + note.encode() + b"\n",
        None,
        timed_out=timed_out,
        truncated=out.truncated or err.truncated,
    )


# -- connecting ---------------------------------------------------------------------------


def _load_config(path: str | None) -> paramiko.SSHConfig:
    full = os.path.expanduser(path or DEFAULT_SSH_CONFIG)
    if not os.path.exists(full):
        if path is not None:
            raise UserError(f"ssh config {full} does not exist")
        return paramiko.SSHConfig()
    try:
        return paramiko.SSHConfig.from_path(full)
    except (OSError, UnicodeDecodeError, paramiko.ConfigParseError) as exc:
        raise UserError(f"cannot read ssh config {full}: {_reason(exc)}") from exc


def _parse_destination(destination: str) -> tuple[str | None, str, int | None]:
    """Split ``[user@]host[:port]`` (IPv6 as ``[addr]:port``) into its parts."""
    user, at, rest = destination.rpartition("@")
    host, port_text = rest, ""
    if rest.startswith("["):
        host, _, tail = rest[1:].partition("]")
        if tail and not tail.startswith(":"):
            host = ""
        port_text = tail[1:]
    elif rest.count(":") == 1:
        host, _, port_text = rest.partition(":")
    if not host or (at and not user) or (port_text == "" and rest.endswith(":")):
        raise UserError(f"bad SSH destination {destination!r}: expected [user@]host[:port] or an ssh config alias")
    port = _parse_port(port_text, destination) if port_text else None
    return (user if at else None), host, port


def _parse_port(text: str, where: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = 0
    if not 0 < port < 65536:
        raise UserError(f"bad SSH port {text!r} in {where!r}")
    return port


def _resolve(
    destination: str,
    options: _Options,
    *,
    port: int | None = None,
    user: str | None = None,
    key_filename: str | None = None,
) -> _Endpoint:
    dest_user, alias, dest_port = _parse_destination(destination)
    try:
        found = options.config.lookup(alias)
    except (paramiko.SSHException, OSError, ValueError) as exc:  # Match exec, canonicalization
        raise UserError(f"ssh config lookup for {alias!r} failed: {_reason(exc)}") from exc
    if found.get("proxycommand"):
        raise UserError(f"{destination}: ProxyCommand in the ssh config is not supported; use ProxyJump")
    keys = [key_filename] if key_filename else []
    keys += [path for path in found.get("identityfile", []) if path not in keys]
    if options.known_hosts_path:
        known_hosts = [options.known_hosts_path]
    else:
        known_hosts = found.get("userknownhostsfile", DEFAULT_KNOWN_HOSTS).split()
    jump = found.get("proxyjump")
    return _Endpoint(
        label=destination,
        host=found.get("hostname", alias),
        port=port or dest_port or _parse_port(found.get("port", str(SSH_PORT)), destination),
        user=user or dest_user or found.get("user") or getpass.getuser(),
        key_files=tuple(os.path.expanduser(path) for path in keys),
        known_hosts=tuple(os.path.expanduser(path) for path in known_hosts),
        jump=None if jump is None or jump.lower() == "none" else jump,
    )


def _open_chain(target: _Endpoint, options: _Options, depth: int) -> list[tuple[paramiko.SSHClient, _Endpoint]]:
    """Connect to ``target``, through its ProxyJump hosts if it has any; target first."""
    if target.jump is None:
        return [(_open_client(target, None, options), target)]
    if depth >= MAX_JUMPS:
        raise UserError(f"{target.display}: ProxyJump chain longer than {MAX_JUMPS} hops (a loop in the ssh config?)")
    hops = [hop.strip() for hop in target.jump.split(",") if hop.strip()]
    if not hops:
        raise UserError(f"{target.display}: empty ProxyJump in the ssh config")
    # `ProxyJump a,b` reaches b through a; explicit port/user/key apply to the target only.
    jump = _resolve(hops[-1], options)
    if len(hops) > 1:
        jump = dataclasses.replace(jump, jump=",".join(hops[:-1]))
    chain = _open_chain(jump, options, depth + 1)
    try:
        jump_transport = chain[0][0].get_transport()
        try:
            if jump_transport is None:
                raise EOFError("connection to the jump host closed")
            tunnel = jump_transport.open_channel(
                "direct-tcpip", (target.host, target.port), ("127.0.0.1", 0), timeout=options.connect_timeout
            )
        except _ChannelErrors as exc:
            raise ConnectError(
                f"{target.display}: jump host {jump.address} cannot reach {target.host}:{target.port}: {_reason(exc)}"
            ) from exc
        return [(_open_client(target, tunnel, options), target), *chain]
    except BaseException:
        for client, _ in chain:
            client.close()
        raise


def _open_client(target: _Endpoint, sock: paramiko.Channel | None, options: _Options) -> paramiko.SSHClient:
    """Connect, retrying a server that drops us before its greeting.

    sshd drops new connections beyond ``MaxStartups`` unauthenticated ones (closed or
    reset before its banner), so a fleet snapshot of many hosts behind one bastion, or of
    one busy host, can see that; it says "busy", not "down". Retried with jittered
    exponential backoff (the clients that were turned away together come back apart)
    while the connect deadline allows.
    """
    deadline = time.monotonic() + options.connect_timeout
    for attempt in itertools.count():
        try:
            return _open_client_once(target, sock, options, deadline)
        except ConnectError as exc:
            pause = random.uniform(0, min(RETRY_PAUSE_CAP, RETRY_PAUSE * 2**attempt))
            if sock is not None or not _dropped_early(exc) or time.monotonic() + pause >= deadline:
                raise
            time.sleep(pause)
    raise AssertionError("unreachable")


def _dropped_early(exc: ConnectError) -> bool:
    """The server closed or reset the connection in the handshake (sshd past MaxStartups
    does, before its greeting; paramiko reports it in one of these shapes)."""
    cause = exc.__cause__
    return isinstance(cause, _DROPPED) or (
        isinstance(cause, paramiko.SSHException) and "banner" in str(cause) and isinstance(cause.__context__, _DROPPED)
    )


# How a server that drops a connection at once shows up: closed (EOF) or reset.
_DROPPED = (EOFError, ConnectionResetError)


def _open_client_once(
    target: _Endpoint, sock: paramiko.Channel | None, options: _Options, deadline: float
) -> paramiko.SSHClient:
    client = paramiko.SSHClient()
    for path in target.known_hosts:
        if os.path.exists(path):
            try:
                _load_known_hosts(client.get_host_keys(), path)
            except OSError as exc:
                raise HostKeyError(f"cannot read known_hosts file {path}: {_reason(exc)}") from exc
    client.set_missing_host_key_policy(_NewHostKeyPolicy(target, options.accept_new_host_key))
    # paramiko raises a bare FileNotFoundError for a missing key file; OpenSSH skips it.
    keys = [path for path in target.key_files if os.path.isfile(path)]
    connection: socket.socket | paramiko.Channel | None = sock
    try:
        if connection is None:
            connection = socket.create_connection((target.host, target.port), timeout=max(deadline - time.monotonic(), 0.1))
            # SSH sends small request/reply packets; Nagle + delayed ACK adds ~40 ms to each.
            connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # Each later phase (banner, key exchange, auth) gets what is left of the budget.
        left = max(deadline - time.monotonic(), 0.1)
        client.connect(
            target.host,
            port=target.port,
            username=target.user,
            key_filename=keys or None,  # type: ignore[arg-type]  # a list works; the stub says str
            sock=connection,
            timeout=left,
            banner_timeout=left,
            auth_timeout=left,
            channel_timeout=left,
            allow_agent=bool(os.environ.get("SSH_AUTH_SOCK")),
        )
    except BaseException as exc:
        client.close()
        if connection is not None:
            connection.close()
        if isinstance(exc, DriftwatchError) or not isinstance(exc, Exception):
            raise
        out_of_time = time.monotonic() >= deadline - 0.05  # paramiko times phases on time.time()
        raise _translate(exc, target, options.connect_timeout, out_of_time) from exc
    return client


def _translate(exc: Exception, target: _Endpoint, connect_timeout: float, out_of_time: bool) -> DriftwatchError:
    where = target.display
    if isinstance(exc, paramiko.BadHostKeyException):
        return HostKeyError(
            f"host key for {where} has CHANGED: the server sent {_describe(exc.key)}, known_hosts "
            f"({target.known_hosts[0]}) has {_describe(exc.expected_key)}; refusing to connect "
            f"(possible man-in-the-middle). If the host was reinstalled, remove the old key with "
            f"`ssh-keygen -R '{target.host_key_name}' -f {target.known_hosts[0]}`"
        )
    if isinstance(exc, _DROPPED):  # e.g. reset while paramiko was still sending its own banner
        return ConnectError(f"{where}: connection closed before the SSH greeting (too busy: MaxStartups?)")
    if isinstance(exc, paramiko.SSHException) and "banner" in str(exc):
        if isinstance(exc.__context__, _DROPPED):
            return ConnectError(f"{where}: connection closed before the SSH greeting (not an SSH server, or too busy: MaxStartups)")
        return ConnectError(f"{where}: no SSH greeting within {connect_timeout:g}s")
    if out_of_time:
        # Whichever phase ran out (paramiko's own wording varies: "No existing session",
        # "Authentication timeout"), the cause is the deadline.
        return ConnectError(f"{where}: SSH handshake did not finish within {connect_timeout:g}s")
    if isinstance(exc, paramiko.AuthenticationException):
        return AuthError(f"{where}: authentication failed for user {target.user!r} ({_reason(exc)})")
    if isinstance(exc, paramiko.SSHException) and "No authentication methods available" in str(exc):
        return AuthError(f"{where}: no SSH key to log in with (set IdentityFile or start ssh-agent)")
    if isinstance(exc, socket.gaierror):
        return ConnectError(f"{where}: cannot resolve host {target.host!r} ({_reason(exc)})")
    if isinstance(exc, TimeoutError):
        return ConnectError(f"{where}: no answer within {connect_timeout:g}s")
    if isinstance(exc, ConnectionRefusedError):
        return ConnectError(f"{where}: connection refused")
    return ConnectError(f"{where}: cannot connect: {_reason(exc)}")


class _NewHostKeyPolicy(paramiko.MissingHostKeyPolicy):
    """Refuse unknown host keys, or with accept_new append them to known_hosts (never replace)."""

    def __init__(self, target: _Endpoint, accept_new: bool) -> None:
        self.target = target
        self.accept_new = accept_new

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        path = self.target.known_hosts[0]
        if not self.accept_new:
            raise HostKeyError(
                f"unknown host key for {self.target.display} ({_describe(key)}); to trust it run "
                f"`ssh-keyscan -p {self.target.port} {self.target.host} >> {_home_short(path)}`, "
                f"or use --accept-new-host-key (accept_new_host_key = true in the config)"
            )
        try:
            _append_known_host(path, hostname, key)
        except OSError as exc:
            raise HostKeyError(f"cannot save the host key of {self.target.display} to {path}: {_reason(exc)}") from exc


def _load_known_hosts(keys: paramiko.HostKeys, path: str) -> None:
    # paramiko's HostKeys.load gives up on the first line it cannot decode; OpenSSH skips it.
    with open(path, encoding="utf-8", errors="replace") as handle:
        for number, raw in enumerate(handle, 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            try:
                entry = paramiko.hostkeys.HostKeyEntry.from_line(line, number)
            except Exception:  # any malformed line: skipped, like OpenSSH does
                continue
            if entry is not None:  # None: a key type paramiko does not know
                for name in entry.hostnames:
                    keys.add(name, entry.key.get_name(), entry.key)


def _append_known_host(path: str, name: str, key: paramiko.PKey) -> None:
    # Append rather than rewrite (as paramiko's save_host_keys does): keeps comments,
    # hashed entries and @cert-authority lines paramiko cannot parse.
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, mode=0o700, exist_ok=True)
    with open(path, "a+b") as handle:
        size = handle.seek(0, os.SEEK_END)
        newline = b""
        if size:
            handle.seek(size - 1)
            newline = b"" if handle.read(1) == b"\n" else b"\n"
        handle.write(newline + f"{name} {key.get_name()} {key.get_base64()}\n".encode())


def _describe(key: paramiko.PKey) -> str:
    digest = base64.b64encode(hashlib.sha256(key.asbytes()).digest()).decode().rstrip("=")
    return f"{key.get_name()} SHA256:{digest}"


def _home_short(path: str) -> str:
    home = os.path.expanduser("~")
    return "~" + path[len(home) :] if path.startswith(home + os.sep) else path


def _reason(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) if str(exc) else ""
    if isinstance(exc, paramiko.ChannelException) and exc.text:
        text = exc.text
    elif isinstance(exc, OSError) and exc.strerror:
        text = exc.strerror
    return text or type(exc).__name__
