"""SshTransport against a real OpenSSH sshd on 127.0.0.1 (the `sshd` fixture): no mocks.

Behavioural tests run in both modes: through the agent (one session channel for all
commands, the default) and with a session channel per command (the fallback).
"""

from __future__ import annotations

import logging
import os
import shlex
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from driftwatch.errors import AuthError, ConnectError, HostKeyError
from driftwatch.transport import CommandResult, quote_path
from driftwatch.transport.base import CLIENT_GRACE, KILL_AFTER
from driftwatch.transport.ssh import MAX_CHANNELS, SshTransport
from tests.sshd import Sshd, free_port, keygen, public_key
from tests.transport import kill_all, pids_matching, sleep_marker, wait_gone

MiB = 1024 * 1024


MODES = ["agent", "channels"]


@pytest.fixture(scope="module", params=MODES)
def ssh(sshd: Sshd, request: pytest.FixtureRequest) -> Iterator[SshTransport]:
    transport = sshd.transport(use_agent=request.param == "agent")
    try:
        yield transport
        assert transport.mode == request.param, transport.agent_error
    finally:
        transport.close()


# -- commands -----------------------------------------------------------------------------


def test_stdout_stderr_and_exit_code(ssh: SshTransport) -> None:
    result = ssh.run("echo out; echo err >&2; exit 3", timeout=10)
    assert result == CommandResult(stdout=b"out\n", stderr=b"err\n", exit_code=3)
    assert not result.ok


def test_success_is_ok(ssh: SshTransport) -> None:
    result = ssh.run("printf '%s' \"$0\"", timeout=10)
    assert result.ok and result.stdout == b"sh"  # the script runs under sh, as locally


def test_stdin_round_trip(ssh: SshTransport) -> None:
    data = os.urandom(3 * MiB)  # more than the SSH window: stdin and stdout must interleave
    result = ssh.run("cat", timeout=30, stdin=data)
    assert result.ok
    assert result.stdout == data


def test_no_stdin_means_eof(ssh: SshTransport) -> None:
    started = time.monotonic()
    result = ssh.run("cat; echo done", timeout=10)
    assert result.stdout == b"done\n"
    assert time.monotonic() - started < 5


def test_stdin_not_read_by_the_command(ssh: SshTransport) -> None:
    result = ssh.run("head -c 3", timeout=10, stdin=b"x" * (5 * MiB))
    assert result.ok and result.stdout == b"xxx"


def test_output_is_bounded(ssh: SshTransport) -> None:
    result = ssh.run("head -c 5242880 /dev/zero; echo tail >&2", timeout=30, max_output=MiB)
    assert result.exit_code == 0
    assert result.truncated
    assert len(result.stdout) == MiB
    assert result.stderr == b"tail\n"


def test_remote_deadline_kills_the_command(ssh: SshTransport) -> None:
    sleep = sleep_marker()
    started = time.monotonic()
    result = ssh.run(sleep, timeout=1)
    elapsed = time.monotonic() - started
    try:
        assert result.timed_out
        assert result.exit_code == 124  # stopped on the host (SIGTERM), not abandoned by us
        assert elapsed < 4
        time.sleep(1)
        assert wait_gone(sleep, within=5) == []
    finally:
        kill_all(pids_matching(sleep))


def test_client_deadline_when_the_host_cannot_kill(ssh: SshTransport, tmp_path: Path) -> None:
    # Stop what enforces the host-side deadline, the script's parent (the agent, or
    # `timeout` on a channel), so it never fires: only the client-side deadline ends the call.
    sleep = sleep_marker()
    pid_file = tmp_path / "pid"
    started = time.monotonic()
    result = ssh.run(f'echo "$PPID" | tee {pid_file}; kill -STOP "$PPID"; {sleep}', timeout=1)
    elapsed = time.monotonic() - started
    stopped = int(pid_file.read_text())
    try:
        assert result.timed_out
        assert result.exit_code is None
        assert 1 + KILL_AFTER <= elapsed < 1 + CLIENT_GRACE + 3
        if ssh.mode == "channels":  # output streams in; the agent answers once, if in time
            assert result.stdout == f"{stopped}\n".encode()
    finally:
        # Resumed, the agent (or `timeout`) acts on its overdue deadline and kills the sleep.
        os.kill(stopped, signal.SIGCONT)
        kill_all(wait_gone(sleep, within=5))
    assert ssh.run("echo still usable", timeout=10).stdout == b"still usable\n"


def test_path_quoting_runs_nothing(ssh: SshTransport, tmp_path: Path) -> None:
    hostile = tmp_path / "a b $(touch pwned) `touch pwned2`; touch pwned3 'q'"
    hostile.mkdir()
    (hostile / "f.txt").write_text("content")
    result = ssh.run(f"cd {shlex.quote(str(tmp_path))} && cat {quote_path(str(hostile / 'f.txt'))}", timeout=10)
    assert result.ok, result.error_text
    assert result.stdout == b"content"
    assert sorted(p.name for p in tmp_path.iterdir()) == [hostile.name]


def test_quote_path_expands_home_on_the_host(ssh: SshTransport) -> None:
    result = ssh.run(f"printf '%s' {quote_path('~/a b')}", timeout=10)
    home = ssh.run('printf "%s" "$HOME"', timeout=10).text
    assert result.text == f"{home}/a b"


# -- concurrency --------------------------------------------------------------------------


def run_concurrently(transport: SshTransport, count: int) -> list[CommandResult]:
    barrier = threading.Barrier(count)
    results: list[CommandResult | None] = [None] * count

    def one(index: int) -> None:
        barrier.wait()
        # Start and end times, taken on the host, show how many commands overlapped.
        results[index] = transport.run(f"date +%s.%N; sleep 1; date +%s.%N; echo {index}", timeout=30)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert all(result is not None for result in results)
    return [result for result in results if result is not None]


def max_overlap(results: list[CommandResult]) -> int:
    events: list[tuple[float, int]] = []
    for result in results:
        start, end = (float(x) for x in result.stdout.split()[:2])
        events += [(start, 1), (end, -1)]
    running = peak = 0
    for _, step in sorted(events):  # an end sorts before a start at the same instant
        running += step
        peak = max(peak, running)
    return peak


def test_eight_concurrent_runs_on_one_connection(ssh: SshTransport) -> None:
    started = time.monotonic()
    results = run_concurrently(ssh, 8)
    elapsed = time.monotonic() - started
    for index, result in enumerate(results):
        assert result.ok, result.error_text
        assert result.stdout.split()[2] == str(index).encode()
    assert max_overlap(results) > 1
    assert elapsed < 7  # in series it would take more than 8 s


def test_more_runs_than_max_sessions_all_succeed(ssh: SshTransport) -> None:
    results = run_concurrently(ssh, 12)  # sshd allows 10 sessions per connection
    for index, result in enumerate(results):
        assert result.ok, result.error_text
        assert result.stdout.split()[2] == str(index).encode()
    assert max_overlap(results) > 1
    if ssh.mode == "channels":  # the agent uses one session, whatever sshd's MaxSessions
        assert max_overlap(results) <= MAX_CHANNELS


def test_no_descriptor_leak(ssh: SshTransport) -> None:
    def open_fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    ssh.run("true", timeout=10)
    before = open_fds()
    for _ in range(10):
        assert ssh.run("echo x", timeout=10).ok
    assert open_fds() - before < 5


# -- connecting ---------------------------------------------------------------------------


def test_address_and_name(sshd: Sshd) -> None:
    with sshd.transport() as transport:
        assert transport.address == f"{sshd.user}@127.0.0.1:{sshd.port}"
        assert transport.name == sshd.destination
        assert transport.via is None


def test_port_and_user_arguments(sshd: Sshd) -> None:
    with sshd.transport("127.0.0.1", port=sshd.port, user=sshd.user) as transport:
        assert transport.address == sshd.destination
        assert transport.run("echo hi", timeout=10).stdout == b"hi\n"


def test_alias_from_ssh_config(sshd: Sshd) -> None:
    # No key or known_hosts passed: both come from the alias's IdentityFile / UserKnownHostsFile.
    with SshTransport.connect("testhost", ssh_config_path=sshd.ssh_config_path, connect_timeout=10) as transport:
        assert transport.name == "testhost"
        assert transport.address == sshd.destination
        assert transport.run("echo via alias", timeout=10).stdout == b"via alias\n"


MATCH_EXEC = """
import sys
from driftwatch.transport.ssh import SshTransport
loaded_at_import = "invoke.tasks" in sys.modules
with SshTransport.connect("matched", ssh_config_path=sys.argv[1], known_hosts_path=sys.argv[2], connect_timeout=10) as t:
    print(loaded_at_import, t.address, t.run("echo matched", timeout=10).stdout.decode().strip())
"""


def test_match_exec_in_ssh_config_still_works(sshd: Sshd, tmp_path: Path) -> None:
    # invoke (which runs `Match exec`) is loaded on first use, not when paramiko is
    # imported: a fresh interpreter shows both halves.
    marker = tmp_path / "on-the-vpn"
    marker.touch()
    config = tmp_path / "ssh_config"
    config.write_text(
        f"Host matched\n    User {sshd.user}\n    IdentityFile {sshd.key_path}\n"
        f'Match originalhost matched exec "test -e {marker}"\n    HostName 127.0.0.1\n    Port {sshd.port}\n'
    )
    out = subprocess.run(
        [sys.executable, "-c", MATCH_EXEC, str(config), sshd.known_hosts_path],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", sshd.destination, "matched"]


def test_proxy_jump(sshd: Sshd) -> None:
    with SshTransport.connect("jumped", ssh_config_path=sshd.ssh_config_path, connect_timeout=10) as transport:
        assert transport.via == sshd.destination
        assert transport.run("echo jumped", timeout=10).stdout == b"jumped\n"
        results = run_concurrently(transport, 3)
        assert all(result.ok for result in results)


def test_proxy_jump_is_honoured(sshd: Sshd, tmp_path: Path) -> None:
    # The target itself is reachable; only a broken jump host makes this fail.
    config = tmp_path / "ssh_config"
    config.write_text(
        f"Host viadead\n    HostName 127.0.0.1\n    Port {sshd.port}\n    User {sshd.user}\n"
        f"    IdentityFile {sshd.key_path}\n    ProxyJump {sshd.user}@127.0.0.1:{free_port()}\n"
    )
    with pytest.raises(ConnectError, match="refused"):
        SshTransport.connect(
            "viadead", ssh_config_path=str(config), known_hosts_path=sshd.known_hosts_path, connect_timeout=5
        )


def test_unknown_host_key(sshd: Sshd, tmp_path: Path) -> None:
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text("")
    with pytest.raises(HostKeyError) as caught:
        sshd.transport(known_hosts_path=str(known_hosts))
    message = str(caught.value)
    assert "127.0.0.1" in message
    assert f"ssh-keyscan -p {sshd.port} 127.0.0.1 >> " in message
    assert "--accept-new-host-key" in message
    assert "\n" not in message
    assert known_hosts.read_text() == ""


def test_accept_new_host_key(sshd: Sshd, tmp_path: Path) -> None:
    known_hosts = tmp_path / "dir" / "known_hosts"  # missing, with its directory
    with sshd.transport(known_hosts_path=str(known_hosts), accept_new_host_key=True) as transport:
        assert transport.run("true", timeout=10).ok
    assert known_hosts.read_text() == sshd.known_hosts_line + "\n"
    with sshd.transport(known_hosts_path=str(known_hosts)) as transport:  # now trusted
        assert transport.run("true", timeout=10).ok


def test_accept_new_keeps_other_entries(sshd: Sshd, tmp_path: Path) -> None:
    known_hosts = tmp_path / "known_hosts"
    other = public_key(keygen(tmp_path / "other"))
    known_hosts.write_text(f"# a comment\nexample.org {other}")  # no final newline
    sshd.transport(known_hosts_path=str(known_hosts), accept_new_host_key=True).close()
    assert known_hosts.read_text() == f"# a comment\nexample.org {other}\n{sshd.known_hosts_line}\n"


def test_hashed_and_malformed_known_hosts_lines(sshd: Sshd, tmp_path: Path) -> None:
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text(sshd.known_hosts_line + "\n")
    subprocess.run(["ssh-keygen", "-H", "-f", str(known_hosts)], check=True, capture_output=True)
    hashed = known_hosts.read_text()
    assert hashed.startswith("|1|")
    known_hosts.write_text(
        "garbage\n"
        "broken ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGarbage\n"
        "@cert-authority *.example.org ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGarbage\n" + hashed
    )
    with sshd.transport(known_hosts_path=str(known_hosts)) as transport:
        assert transport.run("true", timeout=10).ok


@pytest.mark.parametrize("accept_new", [False, True])
def test_changed_host_key_is_refused(sshd: Sshd, tmp_path: Path, accept_new: bool) -> None:
    known_hosts = tmp_path / "known_hosts"
    stale = f"[127.0.0.1]:{sshd.port} {public_key(keygen(tmp_path / 'old_host_key'))}\n"
    known_hosts.write_text(stale)
    with pytest.raises(HostKeyError, match="CHANGED") as caught:
        sshd.transport(known_hosts_path=str(known_hosts), accept_new_host_key=accept_new)
    assert "127.0.0.1" in str(caught.value)
    assert known_hosts.read_text() == stale


def test_connection_refused(sshd: Sshd) -> None:
    started = time.monotonic()
    with pytest.raises(ConnectError) as caught:
        SshTransport.connect(f"127.0.0.1:{free_port()}", connect_timeout=3, known_hosts_path=sshd.known_hosts_path)
    assert time.monotonic() - started < 3
    assert "refused" in str(caught.value)


def test_silent_server_hits_connect_timeout(sshd: Sshd) -> None:
    # Accepts TCP (the kernel completes the handshake) but never sends an SSH banner.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        port = silent.getsockname()[1]
        started = time.monotonic()
        with pytest.raises(ConnectError) as caught:
            SshTransport.connect(f"127.0.0.1:{port}", connect_timeout=1.5, known_hosts_path=sshd.known_hosts_path)
        elapsed = time.monotonic() - started
    assert 1.0 <= elapsed < 1.5 + 3
    assert "127.0.0.1" in str(caught.value) and "within 1.5s" in str(caught.value)


def test_wrong_key(sshd: Sshd, tmp_path: Path) -> None:
    wrong = keygen(tmp_path / "wrong_key")
    with pytest.raises(AuthError) as caught:
        sshd.transport(key_filename=str(wrong))
    assert sshd.user in str(caught.value)


# -- a connection that dies -----------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_dropped_connection_is_a_result(sshd: Sshd, mode: str) -> None:
    transport = sshd.transport(use_agent=mode == "agent")
    sleep, sleep2 = sleep_marker(), sleep_marker()
    try:
        other: list[CommandResult] = []
        bystander = threading.Thread(target=lambda: other.append(transport.run(sleep, timeout=30)))
        bystander.start()
        # Kill the sshd process serving this connection (the nearest sshd above this
        # script): the TCP connection goes with it.
        started = time.monotonic()
        find_sshd = 'p=$PPID; while ! ps -o comm= -p "$p" | grep -q "^sshd"; do p=$(ps -o ppid= -p "$p" | tr -d " "); done; '
        result = transport.run("echo start; " + find_sshd + 'kill -9 "$p"; ' + sleep2, timeout=30)
        bystander.join(timeout=30)
        assert time.monotonic() - started < 15
        assert result.exit_code is None and not result.timed_out
        # On a channel output streams in as it comes; the agent's answer never came.
        assert result.stdout == (b"start\n" if mode == "channels" else b"")
        assert "lost" in result.error_text
        assert other and other[0].exit_code is None and "lost" in other[0].error_text
        after = transport.run("true", timeout=5)
        assert after.exit_code is None and "closed" in after.error_text
    finally:
        transport.close()
        kill_all(pids_matching(sleep) + pids_matching(sleep2))


@pytest.mark.parametrize("mode", MODES)
def test_command_ignoring_sigterm_is_still_a_timeout(sshd: Sshd, mode: str) -> None:
    sleep = sleep_marker()
    with sshd.transport(use_agent=mode == "agent") as transport:
        try:
            result = transport.run(f"trap '' TERM; {sleep}", timeout=1)
            assert result.timed_out and result.exit_code == 137
            assert wait_gone(sleep, within=5) == []
        finally:
            kill_all(pids_matching(sleep))


def test_server_at_max_startups_is_retried_not_reported_down(tmp_path: Path) -> None:
    # MaxStartups 1: with one unauthenticated connection already open, sshd drops every
    # new one before its greeting, as a busy host does under a fleet snapshot.
    from tests.sshd import find_sshd, start_sshd

    exe = find_sshd()
    if exe is None:
        pytest.skip("OpenSSH sshd is not installed")
    busy = start_sshd(tmp_path / "busy", exe, extra_config="MaxStartups 1:100:1")
    squatter = _take_the_only_startup_slot(busy)
    try:
        releaser = threading.Timer(0.4, squatter.close)
        releaser.start()
        with busy.transport(connect_timeout=10) as transport:
            assert transport.run("echo ok", timeout=5).stdout == b"ok\n"
        assert "past MaxStartups" in busy.log()
    finally:
        squatter.close()
        busy.stop()


def test_sixteen_hosts_at_once_past_max_startups_all_connect(tmp_path: Path) -> None:
    # As a fleet snapshot of many hosts behind one bastion: sshd turns the connections past
    # MaxStartups away before its greeting, closed or reset; each is retried, not "down".
    from tests.sshd import find_sshd, start_sshd

    exe = find_sshd()
    if exe is None:
        pytest.skip("OpenSSH sshd is not installed")
    busy = start_sshd(tmp_path / "busy", exe, extra_config="MaxStartups 1")
    barrier = threading.Barrier(16)
    outcomes: list[object] = [None] * 16

    def one(index: int) -> None:
        barrier.wait()
        try:
            with busy.transport(connect_timeout=10) as transport:
                outcomes[index] = transport.run("echo ok", timeout=10).stdout
        except ConnectError as exc:
            outcomes[index] = str(exc)

    try:
        threads = [threading.Thread(target=one, args=(index,)) for index in range(16)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert outcomes == [b"ok\n"] * 16
        assert "past MaxStartups" in busy.log()  # it did turn some away
    finally:
        busy.stop()


class ResettingServer:
    """Accepts connections and resets each before any greeting (sshd past MaxStartups)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            self.accepted += 1
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST, not FIN
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.sock.close()


def test_reset_before_the_greeting_is_retried_and_logs_nothing(
    sshd: Sshd, caplog: pytest.LogCaptureFixture
) -> None:
    server = ResettingServer()
    try:
        with caplog.at_level(logging.DEBUG), pytest.raises(ConnectError) as caught:
            SshTransport.connect(f"127.0.0.1:{server.port}", connect_timeout=1.5, known_hosts_path=sshd.known_hosts_path)
    finally:
        server.close()
    assert "closed before the SSH greeting" in str(caught.value)
    assert server.accepted > 1  # retried within the connect deadline
    # driftwatch says it in one line; paramiko's tracebacks reach no handler (pytest's, a user's).
    assert [record.getMessage() for record in caplog.records if record.name.startswith("paramiko")] == []


def _take_the_only_startup_slot(server: Sshd) -> socket.socket:
    """An unauthenticated connection holding sshd's one startup slot (the fixture's own
    readiness check may still hold it for a moment: wait until we get the greeting)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        sock = socket.create_connection((server.host, server.port))
        if sock.recv(64).startswith(b"SSH-"):
            return sock
        sock.close()
        time.sleep(0.1)
    raise AssertionError("sshd never had a free startup slot")
