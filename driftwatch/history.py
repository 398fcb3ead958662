"""A host's timeline: every change between consecutive stored snapshots, oldest first.

``walk_history`` takes the host's snapshots one at a time, oldest first (``None`` for a
file that could not be read), and keeps only the one before: a year of snapshots costs
the memory of two, plus the changes found. Each step is diffed like ``diff`` (volatile
readings are not changes), the config's ignore rules applied, and filtered by ``--item``
(``triage.patterns.mentions``). Pure: the command reads the store and prints.

Each step compares two consecutive states, so its explanations say "before" and "after",
never "the good run" (``diff.sides``). A change that made a known-bad state of the snapshot
before go away is a recovery: said so, and ranked below what broke in the same step.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from driftwatch.diff import Change, DiffOptions
from driftwatch.diff.sides import BEFORE_AND_AFTER, named
from driftwatch.explain import DiffResult, diff_snapshots
from driftwatch.model import Snapshot
from driftwatch.rules.finding import NOTE, Diagnosis, Finding
from driftwatch.rules.host import RuleOptions
from driftwatch.rules.registry import diagnose
from driftwatch.severity import Severity
from driftwatch.triage.apply import RuleUse, triage
from driftwatch.triage.ignore import Ignoring
from driftwatch.triage.patterns import mentions


@dataclass(frozen=True)
class Moment:
    """One side of a step: when the snapshot was taken, and its labels."""

    taken_at: datetime
    labels: tuple[str, ...] = ()

    @classmethod
    def of(cls, snapshot: Snapshot) -> Moment:
        return cls(snapshot.taken_at, tuple(snapshot.labels))

    def to_json(self) -> dict[str, Any]:
        return {"taken_at": self.taken_at.isoformat(), "labels": list(self.labels)}


@dataclass(frozen=True)
class Step:
    """What changed between two consecutive readable snapshots: sometime after ``before``
    was taken, and by the time ``after`` was."""

    before: Moment
    after: Moment
    changes: list[Change]  # ranked like diff: drift first, then context, then ignored
    unreadable_between: int = 0  # damaged snapshot files skipped between the two

    @property
    def drift(self) -> list[Change]:
        return [c for c in self.changes if c.drift]

    def with_status(self, status: str) -> list[Change]:
        return [c for c in self.changes if c.status == status]

    def to_json(self) -> dict[str, Any]:
        return {
            "at": self.after.taken_at.isoformat(),
            "from": self.before.to_json(),
            "to": self.after.to_json(),
            "unreadable_between": self.unreadable_between,
            "changes": [c.to_json() for c in self.drift],
            "context": [c.to_json() for c in self.with_status("context")],
            "ignored": [c.to_json() for c in self.with_status("ignored")],
        }


@dataclass
class History:
    host: str
    pattern: str | None = None
    since: datetime | None = None
    steps: list[Step] = field(default_factory=list)
    snapshots: int = 0  # readable snapshots read
    unreadable: int = 0  # damaged files skipped
    first: Moment | None = None  # the oldest and newest snapshot read
    last: Moment | None = None
    quiet_steps: int = 0  # steps whose only changes were ignored (shown with --all)

    def count(self, status: str) -> int:
        return sum(len(step.with_status(status)) for step in self.steps)

    def to_json(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "item": self.pattern,
            "since": self.since.isoformat() if self.since else None,
            "first": self.first.to_json() if self.first else None,
            "last": self.last.to_json() if self.last else None,
            "steps": [step.to_json() for step in self.steps],
            "summary": {
                "snapshots": self.snapshots, "unreadable": self.unreadable, "steps": len(self.steps),
                "changes": self.count("drift"), "context": self.count("context"), "ignored": self.count("ignored"),
            },
        }


@dataclass(frozen=True)
class HistoryQuery:
    host: str
    options: DiffOptions
    ignoring: Ignoring
    pattern: str | None = None  # history --item
    since: datetime | None = None


def walk_history(snapshots: Iterable[Snapshot | None], query: HistoryQuery, use: RuleUse | None = None) -> History:
    """``snapshots`` oldest first, ``None`` for each unreadable file (see the module doc)."""
    history = History(query.host, query.pattern, query.since)
    walk = _Walk(query, use)
    previous: Snapshot | None = None
    skipped = 0
    for snapshot in snapshots:
        if snapshot is None:
            history.unreadable += 1
            skipped += 1
            continue
        history.snapshots += 1
        history.first = history.first or Moment.of(snapshot)
        history.last = Moment.of(snapshot)
        if previous is not None:
            walk.step(history, previous, snapshot, skipped)
        previous, skipped = snapshot, 0
    return history


@dataclass
class _Walk:
    """One pair at a time; the diagnosis of the newer side is kept as the next step's older."""

    query: HistoryQuery
    use: RuleUse | None
    diagnosis: Diagnosis | None = None  # of the snapshot before the step now compared

    def step(self, history: History, before: Snapshot, after: Snapshot, skipped: int) -> None:
        if self.query.since is not None and after.taken_at < self.query.since:
            self.diagnosis = None
            return
        with named(BEFORE_AND_AFTER):
            result = diff_snapshots(before, after, options=self.query.options)
        earlier, self.diagnosis = self.diagnosis, result.after or self.diagnosis
        if result.after is not None:  # the facts moved: a known-bad state may have gone
            if earlier is None:
                options = self.query.options
                earlier = diagnose(before, RuleOptions.of(options.focus, options.version_rules))
            result = recoveries(result, result.after.not_covering(earlier.findings))
        result = triage(result, host=self.query.host, ignoring=self.query.ignoring, use=self.use)
        changes = [c for c in result.changes if self.query.pattern is None or mentions(self.query.pattern, c)]
        if not changes:
            return
        if all(c.status == "ignored" for c in changes):
            history.quiet_steps += 1
        history.steps.append(Step(Moment.of(before), Moment.of(after), changes, skipped))


RECOVERY = "recovery: "  # how a recovery's explanation starts (a report marks the old value as the bad one)


def recoveries(result: DiffResult, gone: list[Finding]) -> DiffResult:
    """A drift change of a subject whose known-bad state went away (and that produced none):
    a recovery, low, ranked below what broke."""
    gone = [f for f in gone if f.severity is not NOTE]
    changes = []
    for change in result.changes:
        healed = [f for f in gone if (change.category, str(change.item)) in f.subjects]
        if healed and change.drift and not change.evidence and " — known-bad state (" not in change.explanation:
            why = "; ".join(f"{f.rule}: {f.why}" for f in healed)
            change = replace(change, severity=Severity.low,
                             explanation=f"{RECOVERY}{change.explanation} — known-bad state gone ({why})")
        changes.append(change)
    return replace(result, changes=changes)
