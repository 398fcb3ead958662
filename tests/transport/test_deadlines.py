"""What a command leaves running on the target once its deadline passed, or its transport
was closed: nothing, in all three modes (local, the SSH agent, a channel per command).

Checked with pgrep for a marker only the test's own processes carry: 3 s after run()
returns, none may be left.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import driftwatch.transport.scripts.agent as agent_script
from driftwatch.probes.base import ProbeContext, ProbeTimeout
from driftwatch.probes.gpu import GpuProbe
from driftwatch.transport import CommandResult, Survivor, Transport
from driftwatch.transport.base import KILL_AFTER
from driftwatch.transport.local import LocalTransport
from driftwatch.transport.channel import _bounded_sh, with_survivors
from tests.sshd import DEFAULT_CAPTURE, FAKE_NVIDIA_SMI, Sshd, find_sshd, start_sshd
from tests.transport import kill_all, path_without, pids_matching, sleep_marker, wait_gone
from tests.transport.test_agent import STAY, fake_agent

MODES = ["local", "agent", "channels"]
LEFT_WITHIN = 3  # seconds after run() returns: by then nothing of the command may be left


def open_transport(mode: str, sshd: Sshd) -> Transport:
    if mode == "local":
        return LocalTransport()
    transport = sshd.transport(use_agent=mode == "agent")
    assert transport.run("true", timeout=10).ok
    assert transport.mode == mode, transport.agent_error
    return transport


@pytest.fixture(params=MODES)
def target(request: pytest.FixtureRequest, sshd: Sshd) -> Iterator[Transport]:
    transport = open_transport(request.param, sshd)
    try:
        yield transport
    finally:
        transport.close()


def gpu_shaped(marker: str) -> str:
    """The shape of the gpu probe's script: a shell that exits on SIGTERM, waiting for
    background subshells whose commands ignore SIGTERM (an nvidia-smi stuck in the driver)."""
    return f"trap 'exit 124' TERM; (trap '' TERM; {marker}) & (trap '' TERM; {marker}) & wait"


def test_children_ignoring_sigterm_die_with_their_command(target: Transport) -> None:
    sleep = sleep_marker()
    try:
        started = time.monotonic()
        result = target.run(gpu_shaped(sleep), timeout=1)
        assert time.monotonic() - started < 1 + KILL_AFTER + 3  # not held up by the orphans
        assert result.timed_out and result.exit_code in (124, 137)
        assert wait_gone(sleep, within=LEFT_WITHIN) == []
    finally:
        kill_all(pids_matching(sleep))


def test_a_background_job_left_by_a_finished_command_is_stopped(target: Transport) -> None:
    sleep = sleep_marker()
    try:
        started = time.monotonic()
        result = target.run(f"{sleep} & echo done", timeout=10)
        assert time.monotonic() - started < 10  # the job holds stdout open: not until it ends
        assert result.ok and result.stdout == b"done\n"
        assert wait_gone(sleep, within=LEFT_WITHIN) == []
    finally:
        kill_all(pids_matching(sleep))


@pytest.fixture
def hung_nvidia_smi(sshd: Sshd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """nvidia-smi hangs and ignores SIGTERM, on the sshd's sessions and for local commands."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "nvidia-smi"
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} -I -S {FAKE_NVIDIA_SMI} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{Path(sys.executable).parent}:/usr/bin:/bin")
    monkeypatch.setenv("FAKE_NVIDIA_SMI_CAPTURE", str(DEFAULT_CAPTURE))
    monkeypatch.setenv("FAKE_NVIDIA_SMI_HANG", "ignore-term")
    sshd.fake_env(FAKE_NVIDIA_SMI_HANG="ignore-term")
    try:
        yield
    finally:
        sshd.fake_env()
        kill_all(pids_matching(str(FAKE_NVIDIA_SMI)))


def test_gpu_probe_on_a_hung_nvidia_smi_leaves_nothing_running(target: Transport, hung_nvidia_smi: None) -> None:
    with pytest.raises(ProbeTimeout, match="timed out after 1s"):
        GpuProbe().collect(ProbeContext(transport=target, timeout=1))
    assert wait_gone(str(FAKE_NVIDIA_SMI), within=LEFT_WITHIN) == []


# -- a target without `timeout` -----------------------------------------------------------


@pytest.fixture(scope="module")
def sshd_without_timeout(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    exe = find_sshd()
    if exe is None:
        pytest.skip("OpenSSH sshd is not installed")
    work = tmp_path_factory.mktemp("bare-sshd")
    server = start_sshd(work / "sshd", exe, session_env={"PATH": path_without(work / "bin", "timeout")})
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.parametrize("mode", ["local", "agent"])
def test_no_timeout_on_the_target_still_bounded(
    mode: str, sshd_without_timeout: Sshd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", path_without(tmp_path / "bin", "timeout"))
    transport = open_transport(mode, sshd_without_timeout)
    sleep = sleep_marker()
    try:
        assert transport.run("command -v timeout || echo none", timeout=10).stdout == b"none\n"
        result = transport.run(f"trap '' TERM; {sleep}", timeout=1)
        assert result.timed_out and result.exit_code == 137
        assert wait_gone(sleep, within=LEFT_WITHIN) == []
    finally:
        transport.close()
        kill_all(pids_matching(sleep))


def test_no_timeout_and_no_agent_is_a_clear_error(sshd_without_timeout: Sshd) -> None:
    with sshd_without_timeout.transport(use_agent=False) as transport:
        result = transport.run("echo hi", timeout=10)
    assert result.exit_code == 127 and not result.ok
    assert "no `timeout` on this host to bound the command" in result.error_text


# -- close() while commands run -----------------------------------------------------------


def test_close_interrupts_every_run_in_flight(target: Transport) -> None:
    sleep = sleep_marker()
    # A channel's command is not stopped by close(): it gets a deadline to run on to.
    timeout = 3 if getattr(target, "mode", None) == "channels" else 60
    results: list[CommandResult] = []
    runners = [
        threading.Thread(target=lambda: results.append(target.run(f"trap '' TERM; {sleep}", timeout=timeout)))
        for _ in range(3)
    ]
    try:
        for runner in runners:
            runner.start()
        deadline = time.monotonic() + 10
        while len(pids_matching(f"^{sleep}$")) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(pids_matching(f"^{sleep}$")) == 3
        closed_at = time.monotonic()
        closers = [threading.Thread(target=target.close) for _ in range(2)]  # twice, at once
        for closer in closers:
            closer.start()
        for runner in runners:
            runner.join(timeout=10)
        returned_after = time.monotonic() - closed_at
        for closer in closers:
            closer.join(timeout=10)
        target.close()  # and once more
        assert returned_after < 1.5, "run() waited on after close()"
        assert len(results) == 3 and all(result.interrupted and not result.ok for result in results), results
        assert "interrupted" in results[0].error_text
        later = target.run("echo too late", timeout=5)
        assert later.interrupted and later.stdout == b""
        # SIGTERM is ignored: gone after the SIGKILL that follows it.
        assert wait_gone(sleep, within=(timeout if timeout < 60 else 0) + KILL_AFTER + LEFT_WITHIN) == []
    finally:
        kill_all(pids_matching(sleep))


def test_close_while_the_agent_is_still_starting(sshd: Sshd, tmp_path: Path) -> None:
    transport = sshd.transport(agent_python=fake_agent(tmp_path, STAY), connect_timeout=10)
    results: list[CommandResult] = []
    runner = threading.Thread(target=lambda: results.append(transport.run("echo hi", timeout=30)))
    runner.start()
    time.sleep(0.5)  # waiting for a hello that does not come
    closed_at = time.monotonic()
    transport.close()
    runner.join(timeout=15)
    assert time.monotonic() - closed_at < 1.5
    assert results and results[0].interrupted


# -- what outlives SIGKILL ----------------------------------------------------------------


def test_a_process_sigkill_cannot_end_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    # A process in D state outlives SIGKILL; tests cannot make one, so SIGKILL is withheld.
    deliver = agent_script.signal_sessions

    def without_sigkill(sids: list[int], signum: int) -> None:
        if signum != signal.SIGKILL:
            deliver(sids, signum)

    monkeypatch.setattr(agent_script, "signal_sessions", without_sigkill)
    sleep = sleep_marker()
    try:
        with pytest.raises(ProbeTimeout) as caught:
            ProbeContext(transport=LocalTransport(), timeout=1).run(f"trap '' TERM; {sleep}")
        [pid] = pids_matching(f"^{sleep}$")
        assert "timed out after 1s; still alive after SIGKILL: " in str(caught.value)
        assert f"pid {pid} (state S, sleep)" in str(caught.value)
    finally:
        kill_all(pids_matching(sleep))


def test_live_processes_of_a_session_not_its_zombies(tmp_path: Path) -> None:
    # The sh leaves `true` unreaped (a zombie) and becomes the sleep, under an odd name.
    odd = tmp_path / "a) b (c"
    odd.symlink_to(shutil.which("sleep") or "/bin/sleep")
    sleep = sleep_marker()
    proc = subprocess.Popen(["sh", "-c", f'true & exec "{odd}" {sleep.split()[1]}'], start_new_session=True)
    try:
        deadline = time.monotonic() + 5
        while not pids_matching(sleep) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)  # `true` has exited by now
        assert agent_script.members([proc.pid]) == {proc.pid: [(proc.pid, "S", "a) b (c")]}
        live = _bounded_sh().split("\nlive() {", 1)[1].split("\n}\n", 1)[0]
        listed = subprocess.run(
            ["sh", "-c", f"live() {{{live}\n}}\nlive {proc.pid}"], capture_output=True, text=True, check=False
        )
        assert listed.stdout == f"{proc.pid} S a) b (c\n"
    finally:
        proc.kill()
        proc.wait()


def test_survivor_lines_leave_stderr() -> None:
    result = CommandResult(b"", b"err\nM 4242 D nvidia-smi\nMX 1 D x\nM 7 D a) b (c\n", 137, timed_out=True)
    moved = with_survivors(result, "M")
    assert moved.stderr == b"err\nMX 1 D x\n"
    assert [str(s) for s in moved.survivors] == ["pid 4242 (state D, nvidia-smi)", "pid 7 (state D, a) b (c)"]


def test_survivors_reach_the_probe_error() -> None:
    class Stuck:
        name = "stuck"

        def run(self, script: str, **kwargs: object) -> CommandResult:
            return CommandResult(b"", b"", 137, timed_out=True, survivors=(Survivor(4242, "D", "nvidia-smi"),))

        def close(self) -> None:
            pass

    with pytest.raises(ProbeTimeout) as caught:
        ProbeContext(transport=Stuck(), timeout=10).run("nvidia-smi")
    assert str(caught.value) == "timed out after 10s; still alive after SIGKILL: pid 4242 (state D, nvidia-smi)"



EXITS_WHILE_RUNNING = """
import sys, threading, time
from driftwatch.transport.local import LocalTransport
transport = LocalTransport()
threading.Thread(target=transport.run, args=(sys.argv[1],), kwargs={"timeout": 60}, daemon=True).start()
time.sleep(float(sys.argv[2]))
sys.exit(130)  # as after a Ctrl-C, with nobody waiting for a close() of the transport
"""


def test_local_commands_do_not_outlive_the_collector() -> None:
    sleep = sleep_marker()
    try:
        done = subprocess.run(
            [sys.executable, "-c", EXITS_WHILE_RUNNING, f"trap '' TERM; {sleep}", "1"], timeout=30, check=False
        )
        assert done.returncode == 130
        assert wait_gone(sleep, within=LEFT_WITHIN) == []
    finally:
        kill_all(pids_matching(sleep))
