"""Acceptances: "this host's drift on that item is known and fine", per host and baseline.

An acceptance records the change it accepted: its identity — category, item and the
baseline's value — and the new value accepted. Against a later diff from the same
baseline, a change with that identity and that new value is accepted (not drift); with
another new value it counts again, marked "changed again since accepted"; after
``until`` it counts again, marked "acceptance expired". Nothing is ever extended
silently. An acceptance applies from the snapshot it accepted on (``since``): a diff
of snapshots taken before it was made reads as it did then. Pure: ``book`` reads and
writes them, commands pass them in with ``now``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from driftwatch.diff.change import Change, Waiver
from driftwatch.facts.fmt import value as short_value
from driftwatch.triage.patterns import names, names_change
from driftwatch.when import shown


def canonical(value: Any) -> str:
    """One text per JSON value, so a value read back from the store compares equal."""
    return json.dumps(value, sort_keys=True, default=str, separators=(",", ":"))


def identity(category: str, item: Any, old: Any) -> tuple[str, str, str]:
    return category, str(item), canonical(old)


@dataclass(frozen=True)
class Acceptance:
    category: str
    item: str
    old: Any
    new: Any
    reason: str
    by: str  # user@machine
    at: datetime
    until: datetime | None = None
    label: str = ""  # how reports named the item (a GPU by position and model)
    explanation: str = ""  # the change as it read when accepted, for --list
    since: datetime | None = None  # when the snapshot it accepted was taken (None: made before this was kept)

    @classmethod
    def of(cls, change: Change, *, reason: str, by: str, at: datetime, until: datetime | None,
           since: datetime | None = None) -> Acceptance:
        return cls(
            change.category, str(change.item), change.old, change.new, reason, by, at, until,
            change.label, change.explanation, since,
        )

    def applies_to(self, taken_at: datetime) -> bool:
        """Whether it was in effect for a snapshot taken then (from the snapshot it accepted on)."""
        return self.since is None or taken_at >= self.since

    def matches(self, change: Change) -> bool:
        return self.key == identity(change.category, change.item, change.old) and canonical(self.new) == canonical(change.new)

    def until_text(self) -> str:
        return f"until {shown(self.until)}" if self.until else "never expiring"

    @property
    def key(self) -> tuple[str, str, str]:
        return identity(self.category, self.item, self.old)

    @property
    def shown_item(self) -> str:
        return self.label or self.item

    def expired(self, now: datetime) -> bool:
        return self.until is not None and self.until <= now

    def waiver(self) -> Waiver:
        return Waiver("accepted", self.reason, by=self.by, at=self.at, until=self.until)

    def describe(self) -> str:
        """``accepted 595.71.05 → 610.57.04 by alice@ops 2026-11-30 13:20 UTC: driver rollout``"""
        change = f"{short_value(self.old)} → {short_value(self.new)}"
        return f"accepted {change} by {self.by} {shown(self.at)}: {self.reason}"

    def to_json(self) -> dict[str, Any]:
        return {
            "category": self.category, "item": self.item, "old": self.old, "new": self.new,
            "reason": self.reason, "by": self.by, "at": self.at.isoformat(),
            "until": self.until.isoformat() if self.until else None,
            "label": self.label, "explanation": self.explanation,
            "since": self.since.isoformat() if self.since else None,
        }

    @classmethod
    def from_json(cls, data: Any) -> Acceptance:
        """One stored entry; ValueError (or TypeError/KeyError) when it is not one."""
        until, since = data.get("until"), data.get("since")
        return cls(
            category=_text(data["category"]), item=_text(data["item"]), old=data.get("old"), new=data.get("new"),
            reason=_text(data["reason"]), by=_text(data["by"]), at=_time(data["at"]),
            until=_time(until) if until is not None else None,
            label=_text(data.get("label", "")), explanation=_text(data.get("explanation", "")),
            since=_time(since) if since is not None else None,
        )


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected text, got {type(value).__name__}")
    return value


def _time(value: Any) -> datetime:
    moment = datetime.fromisoformat(_text(value))
    if moment.tzinfo is None:
        raise ValueError(f"time without a zone: {value}")
    return moment


def accept_changes(changes: list[Change], acceptances: Sequence[Acceptance], now: datetime) -> list[Change]:
    """``changes`` with the accepted ones marked, and those that outgrew their acceptance
    marked as counting again. Context and ignored changes are left as they are."""
    by_key: dict[tuple[str, str, str], list[Acceptance]] = {}
    for acceptance in acceptances:
        by_key.setdefault(acceptance.key, []).append(acceptance)
    out: list[Change] = []
    for change in changes:
        found = by_key.get(identity(change.category, change.item, change.old), []) if change.drift else []
        out.append(_judge(change, found, now) if found else change)
    return out


def _judge(change: Change, found: list[Acceptance], now: datetime) -> Change:
    same = [a for a in found if canonical(a.new) == canonical(change.new)]
    if not same:
        return replace(change, lapsed=f"changed again since accepted ({found[-1].describe()})")
    live = [a for a in same if not a.expired(now)]
    if live:
        return replace(change, waiver=live[-1].waiver())
    last = same[-1]
    until = shown(last.until) if last.until else "?"
    return replace(change, lapsed=f"acceptance expired {until} ({last.describe()})")


def acceptable(change: Change) -> bool:
    """What ``accept HOST`` without items takes: the drift, but never a failed probe (a
    failure is never a fact to bless wholesale; name it to accept it)."""
    return change.drift and change.category != "probe"


def select(changes: Iterable[Change], patterns: Sequence[str]) -> tuple[list[Change], list[str]]:
    """The drifting changes ``patterns`` name (all acceptable ones when there are none),
    and the patterns that named none of them."""
    drifting = [c for c in changes if c.drift]
    if not patterns:
        return [c for c in drifting if acceptable(c)], []
    chosen = [c for c in drifting if any(names_change(p, c) for p in patterns)]
    unmatched = [p for p in patterns if not any(names_change(p, c) for c in drifting)]
    return chosen, unmatched


def merge(existing: Sequence[Acceptance], new: Sequence[Acceptance]) -> tuple[list[Acceptance], list[tuple[Acceptance, Acceptance]]]:
    """``existing`` with each of ``new`` replacing what it accepted for the same identity,
    and the (old, new) pairs replaced, for the command to say."""
    by_key = {a.key: a for a in new}
    replaced = [(a, by_key[a.key]) for a in existing if a.key in by_key]
    return [a for a in existing if a.key not in by_key] + list(new), replaced


def revoke(existing: Sequence[Acceptance], patterns: Sequence[str]) -> tuple[list[Acceptance], list[Acceptance], list[str]]:
    """(kept, revoked, patterns that named none); no patterns revokes all."""
    def named(a: Acceptance, pattern: str) -> bool:
        return names(pattern, a.category, a.item, a.label)

    if not patterns:
        return [], list(existing), []
    revoked = [a for a in existing if any(named(a, p) for p in patterns)]
    kept = [a for a in existing if a not in revoked]
    unmatched = [p for p in patterns if not any(named(a, p) for a in existing)]
    return kept, revoked, unmatched
