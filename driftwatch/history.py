"""A host's timeline: every change between consecutive stored snapshots, oldest first.

``walk_history`` takes the host's snapshots one at a time, oldest first (``None`` for a
file that could not be read), and keeps only the one before: a year of snapshots costs
the memory of two, plus the changes found. Each step is diffed like ``diff`` (volatile
readings are not changes), the config's ignore rules applied, and filtered by ``--item``
(``triage.patterns.mentions``). Pure: the command reads the store and prints.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from driftwatch.diff import Change, DiffOptions

from driftwatch.explain import diff_snapshots
from driftwatch.model import Snapshot
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
        if previous is not None and (query.since is None or snapshot.taken_at >= query.since):
            _add_step(history, previous, snapshot, query, use, skipped)
        previous, skipped = snapshot, 0
    return history


def _add_step(
    history: History, before: Snapshot, after: Snapshot, query: HistoryQuery, use: RuleUse | None, skipped: int
) -> None:
    result = triage(
        diff_snapshots(before, after, options=query.options), host=query.host, ignoring=query.ignoring, use=use
    )
    changes = [c for c in result.changes if query.pattern is None or mentions(query.pattern, c)]
    if not changes:
        return
    if all(c.status == "ignored" for c in changes):
        history.quiet_steps += 1
    history.steps.append(Step(Moment.of(before), Moment.of(after), changes, skipped))
