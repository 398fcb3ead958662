"""Transport tests; helpers for checking what a command left running on the target."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

from tests.sshd import SESSION_PATH


def sleep_marker() -> str:
    """A `sleep N` command line no other process on this machine has (GNU sleep takes 30.x)."""
    return f"sleep 30.{uuid.uuid4().int % 10**9:09d}"


def pids_matching(pattern: str) -> list[int]:
    found = subprocess.run(["pgrep", "-f", pattern], check=False, capture_output=True, text=True)
    return [int(pid) for pid in found.stdout.split()]


def wait_gone(pattern: str, within: float) -> list[int]:
    """Poll until no process matches ``pattern``; the pids still there at the end."""
    deadline = time.monotonic() + within
    while (left := pids_matching(pattern)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def kill_all(pids: list[int]) -> None:
    """Clean up after a failed test: these are processes the test itself started."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def path_without(directory: Path, *tools: str) -> str:
    """A PATH of one directory holding every command of the usual session PATH except
    ``tools``: a host without them (a minimal image has no `timeout`)."""
    directory.mkdir(parents=True, exist_ok=True)
    for folder in reversed(SESSION_PATH.split(":")):  # the first on PATH wins: link it last
        if not os.path.isdir(folder):
            continue
        for name in os.listdir(folder):
            link, target = directory / name, os.path.join(folder, name)
            if name not in tools and os.access(target, os.X_OK) and not os.path.isdir(target):
                link.unlink(missing_ok=True)
                link.symlink_to(target)
    return str(directory)
