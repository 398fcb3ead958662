"""The command agent: its target-side script run directly, then SshTransport's agent mode
against the real sshd (one session channel, fallback, a target that misbehaves)."""

from __future__ import annotations

import base64
import glob
import json
import os
import select
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import driftwatch.transport.agent as agent_module
import driftwatch.transport.scripts.agent as agent_script
from driftwatch.transport.agent import line_bound
from driftwatch.transport.base import KILL_AFTER, CommandResult, first_python
from driftwatch.transport.ssh import SshTransport
from tests.sshd import Sshd
from tests.transport import kill_all, pids_matching, sleep_marker, wait_gone
from tests.transport.test_ssh import max_overlap, run_concurrently

AGENT_CODE = (Path(agent_module.__file__).parent / "scripts" / "agent.py").read_text()


def _interpreters() -> list[Any]:
    """This Python, and the oldest the agent supports (3.6) where one is installed."""
    found = [pytest.param(sys.executable, id="py-current")]
    for path in ["/usr/bin/python3.6", *glob.glob(os.path.expanduser("~/.pyenv/versions/3.6*/bin/python3.6"))]:
        if os.access(path, os.X_OK):
            found.append(pytest.param(path, id="py3.6"))
            break
    return found


class LocalAgent:
    """scripts/agent.py in a subprocess, spoken to as the client does, line by line."""

    def __init__(self, python: str, *args: str) -> None:
        self.proc = subprocess.Popen(
            [python, "-I", "-S", "-c", AGENT_CODE, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        self._buffer = b""

    def send(self, line: bytes | dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        data = line if isinstance(line, bytes) else json.dumps(line).encode() + b"\n"
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def request(
        self, id: int, script: str, *, stdin: bytes | None = None, timeout: float = 10, max_output: int = 1 << 20,
        python: str | None = None,
    ) -> None:
        encoded = None if stdin is None else base64.b64encode(stdin).decode()
        request = {"id": id, "script": script, "stdin": encoded, "timeout": timeout, "max_output": max_output}
        if python is not None:
            request["python"] = python
        self.send(request)

    def read(self, within: float = 10) -> dict[str, Any]:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + within
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            assert left > 0 and select.select([self.proc.stdout], [], [], left)[0], "no answer in time"
            chunk = os.read(self.proc.stdout.fileno(), 1 << 20)
            assert chunk, "agent exited"
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def answers(self, count: int) -> dict[int, dict[str, Any]]:
        found = {}
        for _ in range(count):
            message = self.read()
            found[message["id"]] = message
        return found

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


@pytest.fixture(params=_interpreters())
def agent(request: pytest.FixtureRequest) -> Iterator[LocalAgent]:
    local = LocalAgent(request.param, "900", "n0nce")  # as the client starts it: lifetime, nonce
    try:
        hello = local.read()
        assert hello == {"hello": 1, "pid": local.proc.pid, "nonce": "n0nce"}
        yield local
    finally:
        local.close()


def out(message: dict[str, Any]) -> bytes:
    return base64.b64decode(message["stdout"])


# -- the target-side script ---------------------------------------------------------------


def test_answers_by_id_as_commands_finish(agent: LocalAgent) -> None:
    agent.request(1, "sleep 1; echo slow")
    agent.request(2, "echo fast; echo err >&2; exit 3")
    first, second = agent.read(), agent.read()
    assert first["id"] == 2 and second["id"] == 1  # not in request order
    assert (out(first), base64.b64decode(first["stderr"]), first["rc"]) == (b"fast\n", b"err\n", 3)
    assert out(second) == b"slow\n" and second["rc"] == 0 and second["truncated"] is False


def test_stdin_and_bounded_output(agent: LocalAgent) -> None:
    data = os.urandom(3 << 20)
    agent.request(1, "cat", stdin=data, max_output=8 << 20)
    agent.request(2, "head -c 5000000 /dev/zero; echo done >&2", max_output=1000)
    agent.request(3, "cat; echo eof")  # no stdin: EOF at once, not a hang
    answers = agent.answers(3)
    assert out(answers[1]) == data and answers[1]["rc"] == 0
    assert len(out(answers[2])) == 1000 and answers[2]["truncated"] is True and answers[2]["rc"] == 0
    assert base64.b64decode(answers[2]["stderr"]) == b"done\n"
    assert out(answers[3]) == b"eof\n"


def test_killed_by_a_signal_reads_as_a_shell_would(agent: LocalAgent) -> None:
    agent.request(1, 'kill -TERM "$$"')
    agent.request(2, 'kill -KILL "$$"')
    answers = agent.answers(2)
    assert (answers[1]["rc"], answers[2]["rc"]) == (143, 137)


def test_malformed_requests_do_not_stop_it(agent: LocalAgent) -> None:
    agent.send(b"not json\n")
    agent.send(b"[1, 2]\n")
    agent.send(b'{"id": true, "script": "true"}\n')  # a bool is not an id
    agent.send(b"\xff\xfe\n")
    agent.send(b'{"id": 7}\n')
    agent.send({"id": 8, "script": "true", "stdin": "@@@", "timeout": 1, "max_output": 10})
    agent.request(9, "echo alive")
    answers = agent.answers(3)
    assert answers[7]["rc"] is None and "bad request" in answers[7]["error"]
    assert "base64" in answers[8]["error"]
    assert out(answers[9]) == b"alive\n"


def test_at_most_16_commands_at_once(agent: LocalAgent) -> None:
    started = time.monotonic()
    for index in range(20):
        agent.request(index, "date +%s.%N; sleep 1; date +%s.%N")
    answers = agent.answers(20)
    assert all(answer["rc"] == 0 for answer in answers.values())
    assert time.monotonic() - started >= 2  # the last four waited for a slot
    assert 1 < max_overlap([CommandResult(out(a), b"", 0) for a in answers.values()]) <= 16


def test_exits_soon_after_stdin_closes_and_stops_its_commands(agent: LocalAgent) -> None:
    sleep = sleep_marker()
    agent.request(1, f"trap '' TERM; {sleep}", timeout=60)
    try:
        assert wait_until(lambda: bool(pids_matching(sleep)))
        assert agent.proc.stdin is not None
        agent.proc.stdin.close()  # the client closed the channel, or vanished
        assert agent.proc.wait(timeout=KILL_AFTER + 3) == 0  # SIGTERM, then SIGKILL: not 60 s
        assert wait_gone(sleep, within=3) == []
    finally:
        kill_all(pids_matching(sleep))


def test_stops_its_commands_on_sigterm(agent: LocalAgent) -> None:
    sleep = sleep_marker()
    agent.request(1, sleep, timeout=60)
    try:
        assert wait_until(lambda: bool(pids_matching(sleep)))
        agent.proc.terminate()
        assert agent.proc.wait(timeout=KILL_AFTER + 3) == 0
        assert wait_gone(sleep, within=3) == []
    finally:
        kill_all(pids_matching(sleep))


@pytest.mark.parametrize("python", [p.values[0] for p in _interpreters()])
def test_stops_its_commands_at_the_end_of_its_lifetime(python: str) -> None:
    agent = LocalAgent(python, "2")  # the client passes the lifetime in argv
    sleep = sleep_marker()
    try:
        assert agent.read()["hello"] == 1
        agent.request(1, f"trap '' TERM; {sleep}", timeout=60)
        assert wait_until(lambda: bool(pids_matching(sleep)))
        assert agent.proc.wait(timeout=2 + KILL_AFTER + 5) == 0
        assert wait_gone(sleep, within=3) == []
    finally:
        agent.close()
        kill_all(pids_matching(sleep))


def test_deadline_stops_the_whole_command(agent: LocalAgent) -> None:
    # The gpu probe's shape: the shell exits on SIGTERM, its background jobs ignore it.
    sleep = sleep_marker()
    script = f"trap 'exit 124' TERM; (trap '' TERM; {sleep}) & (trap '' TERM; {sleep}) & echo started; wait"
    agent.request(1, script, timeout=1)
    try:
        answer = agent.read(within=1 + KILL_AFTER + 3)
        assert (answer["rc"], answer["timed_out"], out(answer)) == (137, True, b"started\n")
        assert answer["survivors"] == []
        assert wait_gone(sleep, within=3) == []
    finally:
        kill_all(pids_matching(sleep))


# -- Python code in a fork of the agent ------------------------------------------------------

PYTHON_CASES = {
    "json in, json out": ('import json, sys\njson.dump({"got": json.load(sys.stdin)}, sys.stdout)', b'{"a": [1, "\\u00e9"]}'),
    "no stdin is EOF": ("import sys\nprint(repr(sys.stdin.read()))", None),
    "argv and name": ("import sys\nprint(sys.argv, __name__)", None),
    "text as the interpreter encodes it": ('print("\\u00e9t\\u00e9"); print("\\udcff")', None),
    "exit status": ("import sys\nprint('partial')\nsys.exit(3)", None),
    "exit with a message": ("import sys\nsys.exit('bad request')", None),
    "uncaught exception": ("import json\njson.loads('{')", None),
    "killed by a signal": ("import os, signal\nos.kill(os.getpid(), signal.SIGTERM)", None),
    "output past the bound": ("print('x' * 5000)", None),
    "a thread still running at the end": (
        "import threading, time\nthreading.Thread(target=lambda: (time.sleep(0.3), print('late'))).start()", None
    ),
}


@pytest.mark.parametrize("case", list(PYTHON_CASES))
def test_python_code_in_a_fork_answers_as_a_new_interpreter_would(agent: LocalAgent, case: str) -> None:
    code, stdin = PYTHON_CASES[case]
    command = first_python(code, [agent.proc.args[0]])  # type: ignore[index]  # the agent's own python
    agent.request(1, command, stdin=stdin, max_output=1000)
    agent.request(2, command, stdin=stdin, max_output=1000, python=code)
    answers = agent.answers(2)
    started, forked = answers[1], answers[2]
    assert (forked["rc"], out(forked), forked["truncated"]) == (started["rc"], out(started), started["truncated"])
    # The same last line (what a probe reports); a fork may also show the failing source line.
    last = [base64.b64decode(a["stderr"]).decode().strip().splitlines()[-1:] for a in (started, forked)]
    assert last[1] == last[0]


def test_python_code_is_stopped_at_its_deadline_with_what_it_started(agent: LocalAgent) -> None:
    sleep = sleep_marker()
    code = (
        "import signal, subprocess, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        f"subprocess.Popen(['sh', '-c', \"trap '' TERM; {sleep}\"])\n"
        "print('started'); sys.stdout.flush(); time.sleep(60)\n"
    )
    agent.request(1, "exit 99", timeout=1, python=code)
    try:
        answer = agent.read(within=1 + KILL_AFTER + 3)
        assert (answer["rc"], answer["timed_out"], out(answer)) == (137, True, b"started\n")
        assert wait_gone(sleep, within=3) == []
    finally:
        kill_all(pids_matching(sleep))


def test_a_fork_holds_no_pipe_of_another_command(agent: LocalAgent) -> None:
    # The first command's stdin is still being fed when the second forks: were the write
    # end inherited, `cat` would see no EOF until the fork exits.
    data = os.urandom(3 << 20)
    agent.request(1, "sleep 0.5; cat", stdin=data, max_output=8 << 20)
    agent.request(2, "exit 99", python="import time\ntime.sleep(5)")
    started = time.monotonic()
    first = agent.read(within=10)
    assert first["id"] == 1 and out(first) == data
    assert time.monotonic() - started < 3
    assert agent.read(within=10)["rc"] == 0


def test_without_a_fork_the_command_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_fork() -> int:
        raise BlockingIOError("Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", no_fork)
    runner = agent_script.Runner()
    outcome = runner.run("echo started", None, 5.0, 1000, python="print('forked')")
    assert (outcome["rc"], outcome["stdout"]) == (0, b"started\n")


def test_a_fork_stopped_before_it_has_its_session_is_still_stopped() -> None:
    # A stop reaches a command through its session. A fork slow to take its own (here by
    # 0.5 s; in life a busy host's scheduler) was missed by a 0.1 s deadline and ran on.
    sleep = sleep_marker()
    code = f"import subprocess\nsubprocess.call(['sh', '-c', {sleep!r}])\n"
    runner = (
        "import os, sys, time\n"
        "import driftwatch.transport.scripts.agent as agent\n"
        "real = os.setsid\n"
        "os.setsid = lambda: (time.sleep(0.5), real())[1]\n"
        f"outcome = agent.Runner().run('exit 99', None, 0.1, 1000, python={code!r})\n"
        "print(outcome['rc'], outcome['timed_out'])\n"
    )
    try:
        done = subprocess.run([sys.executable, "-c", runner], capture_output=True, text=True, timeout=30)
        assert done.stdout.split() in (["124", "True"], ["137", "True"]), done.stderr
        time.sleep(1.0)  # were the fork still running, its command would have started by now
        assert pids_matching(sleep) == []
    finally:
        kill_all(pids_matching(sleep))


def wait_until(condition: Any, within: float = 5) -> bool:
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


# -- agent mode over SSH ------------------------------------------------------------------


def sessions_started(sshd: Sshd, transport: SshTransport, since: int) -> int:
    """Session channels sshd started on this connection ("Starting session" at VERBOSE),
    in its log past offset ``since``: an earlier test's connection may have had the same
    client port (the sshd serves the whole suite)."""
    port = transport._clients[0].get_transport().sock.getsockname()[1]  # type: ignore[union-attr]
    mark = f"from 127.0.0.1 port {port} "
    return sum("Starting session:" in line and mark in line for line in sshd.log()[since:].splitlines())


@pytest.mark.parametrize("use_agent", [True, False])
def test_one_session_channel_for_all_commands(sshd: Sshd, use_agent: bool) -> None:
    since = len(sshd.log())
    with sshd.transport(use_agent=use_agent) as transport:
        results = run_concurrently(transport, 6)
        results.append(transport.run("echo last", timeout=10))
        assert all(result.ok for result in results)
        assert wait_until(lambda: sessions_started(sshd, transport, since) >= (1 if use_agent else 7))
        time.sleep(0.2)  # a late log line would show up by now
        assert sessions_started(sshd, transport, since) == (1 if use_agent else 7)
        assert transport.mode == ("agent" if use_agent else "channels")


def test_no_python_falls_back_to_channels(sshd: Sshd) -> None:
    with sshd.transport(agent_python="/nonexistent/python3") as transport:
        results = run_concurrently(transport, 3)
        assert all(result.ok for result in results), [r.error_text for r in results]
        assert transport.mode == "channels"
        assert transport.agent_error is not None and "/nonexistent/python3" in transport.agent_error
        assert transport.run("echo still", timeout=10).stdout == b"still\n"


def fake_agent(tmp_path: Path, body: str) -> str:
    """An "interpreter" for agent_python that ignores the agent code and runs ``body``."""
    script = tmp_path / f"fake-agent-{uuid.uuid4().hex[:8]}.py"
    script.write_text(
        "import json, sys, time\n"
        "def say(obj): sys.stdout.write(obj if isinstance(obj, str) else json.dumps(obj) + '\\n'); sys.stdout.flush()\n"
        + body
    )
    wrapper = script.with_suffix("")
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} {script} "$@"\n')  # the nonce is the last argument
    wrapper.chmod(0o755)
    return str(wrapper)


HELLO = "say({'hello': 1, 'pid': 1, 'nonce': sys.argv[-1]})\n"
# The client sends blank lines ahead of its requests (for a profile that reads stdin).
FIRST_ID = (
    "line = sys.stdin.readline()\n"
    "while not line.strip(): line = sys.stdin.readline()\n"
    "request = json.loads(line); rid = request['id']\n"
)
STAY = "sys.stdin.read()\n"  # until the client closes the channel


@pytest.mark.parametrize(
    "body,expected",
    [
        (HELLO + FIRST_ID + "say('not json\\n')\n" + STAY, "protocol error"),
        (HELLO + FIRST_ID + 'say(\'{"no": "id"}\\n\')\n' + STAY, "protocol error"),
        (HELLO + FIRST_ID + "say('a' * 1000000)\n" + STAY, "protocol error"),  # no newline, ever
        (HELLO + FIRST_ID + "sys.exit(0)\n", "exited"),
    ],
    ids=["not-json", "no-id", "endless-line", "exits"],
)
def test_broken_agent_fails_fast_then_channels(sshd: Sshd, tmp_path: Path, body: str, expected: str) -> None:
    with sshd.transport(agent_python=fake_agent(tmp_path, body)) as transport:
        started = time.monotonic()
        result = transport.run("echo hi", timeout=30, max_output=1000)
        assert time.monotonic() - started < 10  # not the 30 s deadline
        assert result.exit_code is None and expected in result.error_text
        after = transport.run("echo hi", timeout=10)
        assert after.ok and after.stdout == b"hi\n" and transport.mode == "channels"


def test_odd_answers_are_contained(sshd: Sshd, tmp_path: Path) -> None:
    body = (
        "print('Welcome to the GPU cluster!')\n"  # a chatty ~/.bashrc, before the hello
        + HELLO
        + FIRST_ID
        + "say({'id': rid + 1000, 'rc': 0, 'stdout': '', 'stderr': '', 'truncated': False})\n"  # nobody's
        + "say({'id': rid, 'rc': 'zero', 'stdout': '', 'stderr': ''})\n"  # a bad answer
        + FIRST_ID
        + "big = __import__('base64').b64encode(b'x' * 5000).decode()\n"
        + "say({'id': rid, 'rc': 0, 'stdout': big, 'stderr': '', 'truncated': False})\n"  # over max_output
        + STAY
    )
    with sshd.transport(agent_python=fake_agent(tmp_path, body)) as transport:
        bad = transport.run("true", timeout=5)
        assert bad.exit_code is None and "bad answer" in bad.error_text
        big = transport.run("true", timeout=5, max_output=1000)
        assert big.ok and big.truncated and big.stdout == b"x" * 1000
        assert transport.mode == "agent"


def test_silent_agent_falls_back_after_the_connect_timeout(sshd: Sshd, tmp_path: Path) -> None:
    with sshd.transport(agent_python=fake_agent(tmp_path, STAY), connect_timeout=2) as transport:
        started = time.monotonic()
        result = transport.run("echo hi", timeout=10)
        assert result.ok and 2 <= time.monotonic() - started < 8
        assert transport.mode == "channels" and "no hello" in (transport.agent_error or "")


def test_caller_deadline_while_the_agent_starts(sshd: Sshd, tmp_path: Path) -> None:
    with sshd.transport(agent_python=fake_agent(tmp_path, STAY), connect_timeout=4) as transport:
        started = time.monotonic()
        result = transport.run("echo hi", timeout=1)
        assert result.timed_out and result.exit_code is None
        assert time.monotonic() - started < 3  # its own deadline, not the agent's 4 s hello wait


def test_nothing_left_running_after_close(sshd: Sshd, tmp_path: Path) -> None:
    python = tmp_path / f"python3-{uuid.uuid4().hex[:8]}"  # a name to find the agent by
    python.symlink_to(sys.executable)
    sleep = sleep_marker()
    transport = sshd.transport(agent_python=str(python))
    try:
        assert transport.run("true", timeout=5).ok and transport.mode == "agent"
        assert pids_matching(str(python))
        runner = threading.Thread(target=transport.run, args=(sleep,), kwargs={"timeout": 60})
        runner.start()
        assert wait_until(lambda: bool(pids_matching(sleep)))
        transport.close()
        runner.join(timeout=5)
        # stdin EOF: the agent stops its commands (long before their deadline), then exits.
        assert wait_gone(sleep, within=5) == []
        assert wait_gone(str(python), within=5) == []
    finally:
        transport.close()
        kill_all(pids_matching(sleep) + pids_matching(str(python)))


def test_agent_is_replaced_before_its_lifetime_ends(sshd: Sshd, monkeypatch: pytest.MonkeyPatch) -> None:
    # Lifetime minus the margin leaves 5 s: a 1 s command (4 s with grace) fits at first only.
    monkeypatch.setattr(agent_module, "AGENT_LIFETIME", agent_module._EXPIRY_MARGIN + 5)
    since = len(sshd.log())
    with sshd.transport() as transport:
        assert transport.run("echo one", timeout=1).ok
        time.sleep(1.5)
        assert transport.run("echo two", timeout=1).stdout == b"two\n"
        assert transport.mode == "agent"
        assert wait_until(lambda: sessions_started(sshd, transport, since) == 2)


def test_line_bound_fits_full_output() -> None:
    for size in (0, 1, 2, 3, 1000, 8 << 20):
        text = base64.b64encode(b"x" * size).decode()
        answer = {"id": 1, "rc": 0, "stdout": text, "stderr": text, "truncated": True}
        assert len(json.dumps(answer)) < line_bound(size)


def test_script_agrees_with_the_client_on_the_kill_delay() -> None:
    assert f"\nKILL_AFTER = {KILL_AFTER}  #" in AGENT_CODE


def test_prepare_starts_the_agent_before_the_first_command(sshd: Sshd) -> None:
    with sshd.transport() as transport:
        assert transport.mode == "undecided"
        transport.prepare()
        deadline = time.monotonic() + 10
        while transport.mode == "undecided" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert transport.mode == "agent"
        assert transport.run("echo hi", timeout=5).stdout == b"hi\n"
