"""--deadline's machinery in driftwatch/interrupt.py: time given out shrinks to fit the
cut, the cut closes open transports (stopping nothing else), and hosts unfinished at the
end are given up."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from driftwatch import interrupt


class Resource:
    def __init__(self) -> None:
        self.closed = threading.Event()

    def close(self) -> None:
        self.closed.set()


@pytest.fixture(autouse=True)
def clean() -> Iterator[None]:
    interrupt.reset()
    yield
    interrupt.reset()


def test_without_a_deadline_time_is_not_shortened() -> None:
    assert interrupt.within(30.0, margin=3.0) == 30.0


def test_time_given_out_ends_before_the_cut() -> None:
    with interrupt.deadline(20.0, reserve=5.0):
        assert 11.0 < interrupt.within(30.0, margin=3.0) <= 12.0  # 20 - 5 - 3
        assert interrupt.within(4.0) == 4.0
    assert interrupt.within(30.0) == 30.0  # and forgotten after it


def test_the_cut_closes_open_transports_and_later_ones_at_once_without_stopping() -> None:
    before, after = Resource(), Resource()
    with interrupt.deadline(0.3):
        interrupt.register(before)
        assert before.closed.wait(5.0), "the cut did not close the open transport"
        assert interrupt.expired() and not interrupt.requested()
        interrupt.check()  # a deadline is no Ctrl-C: nothing raises
        interrupt.register(after)  # connected past the cut: closed at once, its commands return
        assert after.closed.is_set()
    assert not interrupt.expired()


def test_hosts_unfinished_at_the_end_are_given_up() -> None:
    release = threading.Event()

    def check(host: str) -> str:
        if host == "hung":
            release.wait(30.0)
        return f"{host}: checked"

    try:
        started = time.monotonic()
        with interrupt.deadline(1.0, reserve=0.5):
            results = interrupt.run_all(
                check, ["gpu01", "hung", "gpu02"], workers=2, name="t", late=lambda host: f"{host}: late"
            )
        assert results == ["gpu01: checked", "hung: late", "gpu02: checked"]
        assert time.monotonic() - started < 10.0, "waited for the hung host"
    finally:
        release.set()
