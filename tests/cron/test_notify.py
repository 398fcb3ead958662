"""``--notify cmd:PATH`` hooks that misbehave, run for real: a hook that hangs (with or
without SIGTERM), one that starts children, one that prints without end, and webhooks
bounded by a deadline."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from driftwatch.cron import notify
from tests.hooks import SilentHook
from tests.transport import kill_all, pids_matching, sleep_marker, wait_gone

PAYLOAD = {"text": "driftwatch: gpu01 drifted", "host": "gpu01"}


def hook(tmp_path: Path, body: str) -> str:
    program = tmp_path / "hook.sh"
    program.write_text("#!/bin/sh\n" + body)
    program.chmod(0o755)
    return f"cmd:{program}"


@pytest.fixture
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(notify, "TIMEOUT_S", 1.0)
    monkeypatch.setattr(notify, "BACKOFF_S", 0.1)


@pytest.mark.parametrize("deaf", [False, True], ids=["hangs", "hangs-and-ignores-sigterm"])
def test_a_hung_hook_leaves_nothing_running_after_three_tries(tmp_path: Path, quick: None, deaf: bool) -> None:
    sleep = sleep_marker()
    trap = "trap '' TERM\n" if deaf else ""
    dest = hook(tmp_path, f"{trap}{sleep} &\n{sleep}\n")  # a child of its own, then it hangs
    try:
        started = time.monotonic()
        warning = notify.send(dest, PAYLOAD)
        assert wait_gone(sleep, within=1.0) == [], "the hook's processes outlived it"
        assert warning is not None and "timed out after 1s" in warning
        assert time.monotonic() - started < 3 * (1 + 2 + 1) + 1  # each try: its timeout, SIGTERM, SIGKILL
    finally:
        kill_all(pids_matching(sleep))


def test_what_a_hook_prints_is_bounded(tmp_path: Path) -> None:
    # 150 MB on stdout and stderr, then a failure: the warning has its last line read, and
    # the collector's memory does not grow with what it printed.
    dest = hook(tmp_path, "head -c 150000000 /dev/zero\nhead -c 150000000 /dev/zero | tr '\\0' x >&2\nexit 3\n")
    code = (
        "import json, sys\n"
        "from driftwatch.cron.notify import send\n"
        f"warning = send({dest!r}, {PAYLOAD!r}, attempts=1)\n"
        # VmHWM, not ru_maxrss: after fork and exec, ru_maxrss keeps the peak of the process
        # that forked (pytest's worker, grown large in a long run), not this interpreter's.
        "hwm = [line.split()[1] for line in open('/proc/self/status') if line.startswith('VmHWM:')]\n"
        "print(json.dumps([warning, int(hwm[0])]))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    warning, max_rss_kib = json.loads(done.stdout)
    assert warning.startswith("notification to cmd:") and "failed: exit 3" in warning and len(warning) < 1000
    assert max_rss_kib < 150 * 1024, f"{max_rss_kib} KiB: the hook's output was held in memory"


@pytest.fixture
def silent_server() -> Iterator[str]:
    server = SilentHook()
    yield server.url
    server.close()


@pytest.mark.parametrize("kind", ["webhook", "cmd"])
def test_every_try_ends_before_the_deadline(tmp_path: Path, silent_server: str, kind: str) -> None:
    sleep = sleep_marker()
    dest = silent_server if kind == "webhook" else hook(tmp_path, f"{sleep}\n")
    try:
        started = time.monotonic()
        warning = notify.send(dest, PAYLOAD, until=started + 4.0)
        took = time.monotonic() - started
        assert took < 4.3, f"{took:.1f}s: the notification ran past its deadline"
        assert wait_gone(sleep, within=1.0) == []
        assert warning is not None and "failed" in warning and "SECRET" not in warning
        assert notify.send(dest, PAYLOAD, until=time.monotonic() + 0.1) == (
            f"notification to {notify.describe_destination(dest)} failed: no time left before the --deadline"
        )
    finally:
        kill_all(pids_matching(sleep))
