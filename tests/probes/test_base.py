"""What every probe gets from its context: deadlines and bounded output become errors."""

from __future__ import annotations

import pytest

from driftwatch.probes.base import ProbeContext, ProbeError, ProbeTimeout
from driftwatch.transport.local import LocalTransport


def test_output_past_the_bound_is_an_error_that_says_so() -> None:
    ctx = ProbeContext(transport=LocalTransport(), timeout=10)
    with pytest.raises(ProbeError, match="truncated at the 8 MiB bound"):
        ctx.run("head -c 9000000 /dev/zero")


def test_deadline_is_a_timeout() -> None:
    ctx = ProbeContext(transport=LocalTransport(), timeout=1)
    with pytest.raises(ProbeTimeout, match="timed out after 1s"):
        ctx.run("sleep 5")
