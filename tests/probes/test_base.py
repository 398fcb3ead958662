"""What every probe gets from its context: deadlines and bounded output become errors."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from driftwatch.probes.base import ProbeContext, ProbeError, ProbeTimeout, Shared
from driftwatch.transport.local import LocalTransport


def test_output_past_the_bound_is_an_error_that_says_so() -> None:
    ctx = ProbeContext(transport=LocalTransport(), timeout=10)
    with pytest.raises(ProbeError, match="truncated at the 8 MiB bound"):
        ctx.run("head -c 9000000 /dev/zero")


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
