"""Run commands on this machine: the ``local`` target."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from typing import IO

from driftwatch.transport.base import (
    CLIENT_GRACE,
    DEFAULT_MAX_OUTPUT,
    TIMEOUT_EXITS,
    CommandResult,
    bounded_script,
)
from driftwatch.transport.bounded import BoundedBuffer


def _drain(stream: IO[bytes], buffer: BoundedBuffer) -> None:
    # Keep reading past the bound so the child never blocks on a full pipe.
    for chunk in iter(lambda: stream.read(65536), b""):
        buffer.feed(chunk)


class LocalTransport:
    name = "local"

    def run(
        self,
        script: str,
        *,
        timeout: float,
        stdin: bytes | None = None,
        max_output: int = DEFAULT_MAX_OUTPUT,
    ) -> CommandResult:
        proc = subprocess.Popen(
            ["sh", "-c", bounded_script(script, timeout)],
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        out, err = BoundedBuffer(max_output), BoundedBuffer(max_output)
        assert proc.stdout is not None and proc.stderr is not None
        readers = [
            threading.Thread(target=_drain, args=(proc.stdout, out), daemon=True),
            threading.Thread(target=_drain, args=(proc.stderr, err), daemon=True),
        ]
        for reader in readers:
            reader.start()
        if stdin is not None:
            assert proc.stdin is not None
            try:
                proc.stdin.write(stdin)
                proc.stdin.close()
            except BrokenPipeError:
                pass
        timed_out = False
        try:
            code: int | None = proc.wait(timeout=timeout + CLIENT_GRACE)
        except subprocess.TimeoutExpired:
            timed_out = True
            code = None
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for reader in readers:
            reader.join(timeout=1.0)
        for stream in (proc.stdout, proc.stderr):
            stream.close()  # a cron job or a long fleet run must not leak descriptors
        return CommandResult(
            stdout=out.getvalue(),
            stderr=err.getvalue(),
            exit_code=code,
            timed_out=timed_out or code in TIMEOUT_EXITS,
            truncated=out.truncated or err.truncated,
        )

    def close(self) -> None:
        return None
