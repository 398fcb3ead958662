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

from driftwatch.diff.change import Change
from driftwatch.explain.result import DiffResult
from driftwatch.rules.finding import Finding
from driftwatch.severity import Severity
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
    changes = rank_changes(carried(accept_changes(changes, acceptances, ignoring.now)))
    if use is not None:
        use.add(ignoring.in_scope(host), used)
    found, settled = settle([*result.findings, *result.settled], changes)
    summary = {**result.summary, **tally(changes), "known_bad": sum(f.severity is not Severity.info for f in found)}
    return replace(result, changes=changes, summary=summary, findings=found, settled=settled)


def carried(changes: list[Change]) -> list[Change]:
    """A change that is part of another (a library its package ships), or that another carries
    (a package inside an image), is decided with it: accepting the package accepts the
    library the server maps from it; accepting the image, the packages inside it."""
    waivers = {(c.category, str(c.item)): c.waiver for c in changes if c.waiver is not None}
    carried_by = {part: (c.category, str(c.item)) for c in changes if c.waiver is not None for part in c.carries}
    out = []
    for change in changes:
        key = (change.category, str(change.item))
        carrier = next((k for k in (*change.part_of, carried_by.get(key)) if k in waivers), None) if change.drift else None
        if carrier is None:
            out.append(change)
            continue
        waiver = waivers[carrier]
        assert waiver is not None
        out.append(replace(change, waiver=replace(waiver, reason=f"with {carrier[0]} {carrier[1]}: {waiver.reason}")))
    return out


def settle(findings: list[Finding], changes: list[Change]) -> tuple[list[Finding], list[Finding]]:
    """(the known-bad states still open, those decided on): a state every one of whose
    changes (the drift it came with, or its own line) was accepted or ignored is decided with
    them; one with any of them still drifting, or with none at all, stays open."""
    by_key: dict[tuple[str, str], list[Change]] = {}
    for change in changes:
        if change.status != "context":
            by_key.setdefault((change.category, str(change.item)), []).append(change)
    still, settled = [], []
    for finding in findings:
        tied = [c for subject in finding.subjects for c in by_key.get(subject, [])]
        decided = bool(tied) and all(c.waiver is not None for c in tied)
        (settled if decided else still).append(finding)
    return still, settled
