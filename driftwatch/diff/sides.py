"""What the two sides of a comparison are called in the explanations.

``diff`` and ``check`` compare a good run with a new one; ``history`` compares each
snapshot with the one before it, where neither side is "the good run" (the step that
removes a bad override would otherwise call the bad snapshot good). The explanation
builders read the words from here, and ``history`` sets its own with :func:`named`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass


@dataclass(frozen=True)
class Sides:
    old: str  # the old side as a subject: "the good run auto-detected 0.88"
    new: str  # the new side as a subject: "the new run logged no …"
    in_old: str  # "(not set in the good run)"
    old_label: str  # before a computed figure: "good run 21.7 − …; now …"
    new_label: str
    new_log: str  # "the new log shows it failed"


GOOD_AND_NEW = Sides("the good run", "the new run", "in the good run", "good run", "now", "the new log")
BEFORE_AND_AFTER = Sides("the run before", "the run after", "before", "before", "after", "the later log")

_current: ContextVar[Sides] = ContextVar("driftwatch_sides", default=GOOD_AND_NEW)


def sides() -> Sides:
    return _current.get()


@contextmanager
def named(words: Sides) -> Iterator[None]:
    token = _current.set(words)
    try:
        yield
    finally:
        _current.reset(token)
