"""Lay the config's ignore rules and a host's acceptances over a diff.

The diff core stays as it is: this takes its result and returns another, with the
accepted and ignored changes marked (never dropped), re-ranked, and the summary counted
again. What each command needs to warn about comes back with it: the numbers of the
rules that were in scope and of those that named something.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from driftwatch.explain.result import DiffResult
from driftwatch.explain.summary import tally
from driftwatch.explain.rank import rank_changes
from driftwatch.triage.accept import Acceptance, accept_changes
from driftwatch.triage.ignore import Ignoring, ignore_changes


@dataclass
class RuleUse:
    """Over one command: the ignore rules that could apply, and those that named something."""

    in_scope: set[int] = field(default_factory=set)
    used: set[int] = field(default_factory=set)
    _guard: threading.Lock = field(default_factory=threading.Lock, repr=False)  # check runs hosts in threads

    def add(self, in_scope: Sequence[int], used: set[int]) -> None:
        with self._guard:
            self.in_scope.update(in_scope)
            self.used |= used

    def unused(self) -> list[int]:
        return sorted(self.in_scope - self.used)


def triage(
    result: DiffResult, *, host: str, ignoring: Ignoring, acceptances: Sequence[Acceptance] = (),
    use: RuleUse | None = None,
) -> DiffResult:
    changes, used = ignore_changes(result.changes, ignoring, host)
    changes = rank_changes(accept_changes(changes, acceptances, ignoring.now))
    if use is not None:
        use.add(ignoring.in_scope(host), used)
    return replace(result, changes=changes, summary={**result.summary, **tally(changes)})
