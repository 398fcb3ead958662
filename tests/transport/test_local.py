"""LocalTransport: the same contract as SSH, on this machine."""

from __future__ import annotations

import shlex
import time
from pathlib import Path

from driftwatch.transport import CommandResult, quote_path
from driftwatch.transport.local import LocalTransport
from tests.transport import kill_all, pids_matching, sleep_marker, wait_gone

MiB = 1024 * 1024
HOSTILE_NAME = "a b $(touch pwned) `touch pwned2`; touch pwned3 'q'"


def test_stdout_stderr_and_exit_code() -> None:
    result = LocalTransport().run("echo out; echo err >&2; exit 3", timeout=10)
    assert result == CommandResult(stdout=b"out\n", stderr=b"err\n", exit_code=3)


def test_stdin_round_trip() -> None:
    result = LocalTransport().run("cat", timeout=10, stdin=b"hello\x00world")
    assert result.ok and result.stdout == b"hello\x00world"


def test_output_is_bounded() -> None:
    result = LocalTransport().run("head -c 5242880 /dev/zero", timeout=30, max_output=MiB)
    assert result.exit_code == 0 and result.truncated and len(result.stdout) == MiB


def test_deadline_kills_the_command() -> None:
    sleep = sleep_marker()
    started = time.monotonic()
    result = LocalTransport().run(sleep, timeout=1)
    try:
        assert result.timed_out and result.exit_code == 124
        assert time.monotonic() - started < 4
        assert wait_gone(sleep, within=5) == []
    finally:
        kill_all(pids_matching(sleep))


def test_path_quoting_runs_nothing(tmp_path: Path) -> None:
    hostile = tmp_path / HOSTILE_NAME
    hostile.mkdir()
    (hostile / "f.txt").write_text("content")
    result = LocalTransport().run(
        f"cd {shlex.quote(str(tmp_path))} && cat {quote_path(str(hostile / 'f.txt'))}", timeout=10
    )
    assert result.ok, result.error_text
    assert result.stdout == b"content"
    assert sorted(p.name for p in tmp_path.iterdir()) == [HOSTILE_NAME]


def test_hostile_name_is_live_when_not_quoted(tmp_path: Path) -> None:
    # The control for the test above: naive double quotes do run the payload.
    LocalTransport().run(f'cd {shlex.quote(str(tmp_path))} && echo "{HOSTILE_NAME}"', timeout=10)
    assert (tmp_path / "pwned").exists()


def test_quote_path_expands_home_on_the_target() -> None:
    transport = LocalTransport()
    home = transport.run('printf "%s" "$HOME"', timeout=10).text
    assert transport.run(f"printf '%s' {quote_path('~/a b')}", timeout=10).text == f"{home}/a b"
    assert transport.run(f"printf '%s' {quote_path('~')}", timeout=10).text == home


def test_command_ignoring_sigterm_is_still_a_timeout() -> None:
    # SIGTERM is not enough, SIGKILL follows: exit 137, not 124, and still our deadline.
    sleep = sleep_marker()
    try:
        result = LocalTransport().run(f"trap '' TERM; {sleep}", timeout=1)
        assert result.timed_out and result.exit_code == 137
        assert wait_gone(sleep, within=5) == []
    finally:
        kill_all(pids_matching(sleep))


def test_pipes_are_closed_not_left_to_the_garbage_collector() -> None:
    import gc
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        for _ in range(5):
            LocalTransport().run("echo x; echo y >&2", timeout=5, stdin=b"in")
        gc.collect()
    assert not [w for w in caught if issubclass(w.category, ResourceWarning)]
