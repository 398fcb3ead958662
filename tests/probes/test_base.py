"""What every probe gets from its context: deadlines and bounded output become errors."""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from driftwatch import interrupt
from driftwatch.probes.base import ProbeContext, ProbeError, ProbeTimeout, Shared, json_report
from driftwatch.probes.files import FilesProbe
from driftwatch.settings import WatchSettings
from driftwatch.transport.base import CLIENT_GRACE, CommandResult, first_python
from driftwatch.transport.local import LocalTransport


def test_output_past_the_bound_is_an_error_that_says_so() -> None:
    ctx = ProbeContext(transport=LocalTransport(), timeout=10)
    with pytest.raises(ProbeError, match="truncated at the 8 MiB bound"):
        ctx.run("head -c 9000000 /dev/zero")


@pytest.mark.parametrize("text, why", [
    ('{"files": {}', "unreadable files report: Expecting"),  # cut short
    ('["files"]', "unreadable files report: not an object"),
    ('{"patterns": []}', "unreadable files report: no files"),
    ('{"files": []}', "unreadable files report: no files"),
])
def test_a_collectors_unreadable_report_is_an_error_not_facts(text: str, why: str) -> None:
    with pytest.raises(ProbeError, match=why):
        json_report(text, "files", ("files",))


def test_deadline_is_a_timeout() -> None:
    ctx = ProbeContext(transport=LocalTransport(), timeout=1)
    with pytest.raises(ProbeTimeout, match="timed out after 1s"):
        ctx.run("sleep 5")


def test_shared_computes_once_for_concurrent_callers_and_all_get_the_error() -> None:
    shared = Shared()
    calls: list[int] = []
    started = threading.Event()

    def slow() -> int:
        calls.append(1)
        started.set()
        time.sleep(0.3)
        return 42

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda _: shared.once("k", slow), range(4)))
    assert results == [42] * 4 and len(calls) == 1

    def broken() -> int:
        raise ProbeTimeout("timed out after 1s")

    for _ in range(2):  # the second caller gets the first one's exception, not a rerun
        with pytest.raises(ProbeTimeout, match="timed out after 1s"):
            shared.once("bad", broken)
    assert shared.once("other", lambda: 7) == 7


@pytest.mark.skipif(not os.access("/usr/bin/python3", os.X_OK), reason="no /usr/bin/python3 here")
def test_unconfigured_python_prefers_the_system_one_over_a_shim_on_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A pyenv/conda shim first on PATH costs ~60 ms per start; the scripts need any python3.
    shim_log = tmp_path / "shim-used"
    shim = tmp_path / "bin" / "python3"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\necho used >> "{shim_log}"\nexec /usr/bin/python3 "$@"\n')
    shim.chmod(0o755)
    monkeypatch.setenv("PATH", f"{shim.parent}:{os.environ['PATH']}")
    ctx = ProbeContext(transport=LocalTransport(), timeout=20)
    result = ctx.run(first_python("import sys; print(sys.executable)"))
    assert result.stdout.decode().strip() == "/usr/bin/python3"
    watched = tmp_path / "launch.sh"
    watched.write_text("python -m sglang.launch_server\n")
    files = FilesProbe().collect(ProbeContext(transport=LocalTransport(), watch=WatchSettings(files=[str(watched)])))
    assert files["files"][str(watched)]["sha256"]  # the probe ran, on the system python
    assert not shim_log.exists()


def test_no_python_at_all_says_so() -> None:
    ctx = ProbeContext(transport=LocalTransport(), timeout=20)
    result = ctx.run(first_python("print(1)", ("/nonexistent/python3", "no-such-python3")))
    assert result.exit_code == 127
    assert "python3: not found (tried: /nonexistent/python3 no-such-python3)" in result.error_text


class Unanswered:
    """A transport whose commands never answer until it is closed (a wedged connection)."""

    name = "unanswered"

    def __init__(self) -> None:
        self.closed = threading.Event()
        self.timeouts: list[float] = []

    def run(self, script: str, *, timeout: float, stdin: bytes | None = None, max_output: int = 0) -> CommandResult:
        self.timeouts.append(timeout)
        self.closed.wait(60.0)
        return CommandResult(b"", b"closed\n", None)

    def close(self) -> None:
        self.closed.set()


def test_under_a_deadline_a_command_gets_what_is_left_and_the_cut_makes_it_a_timeout() -> None:
    transport = Unanswered()
    ctx = ProbeContext(transport=transport, timeout=30)
    interrupt.reset()
    try:
        with interrupt.deadline(4.0):
            interrupt.register(transport)
            with pytest.raises(ProbeTimeout, match="cut short at the --deadline"):
                ctx.run("nvidia-smi")
            with pytest.raises(ProbeTimeout, match="not run: no time left before the --deadline"):
                ctx.run("nvidia-smi")
    finally:
        interrupt.reset()
    [given] = transport.timeouts  # the second command was never started
    assert 0.5 <= given <= 4.0 - CLIENT_GRACE
