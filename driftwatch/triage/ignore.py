"""``[[ignore]]`` rules: what a team never wants to hear about, written in the config.

A rule names a category glob and an item glob (see ``patterns``), optionally the hosts
(globs) and groups it is for, a reason, and an ``until`` after which the changes it
named count again, each marked "ignore rule expired". A change a rule names is shown as
ignored, counted in one summary line, and is never drift. Pure: the config loads the
rules, commands pass them in with ``now``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import date, datetime, timezone
from fnmatch import fnmatchcase
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from driftwatch.diff.change import CATEGORIES, Change, Waiver
from driftwatch.errors import UserError
from driftwatch.triage.patterns import glob, names_item
from driftwatch.when import parse_when, shown


class IgnoreRule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    category: str = "*"
    item: str = "*"
    hosts: list[str] = Field(default_factory=list)  # host name globs
    groups: list[str] = Field(default_factory=list)  # config groups
    reason: str
    until: datetime | None = None

    @field_validator("reason")
    @classmethod
    def _reason(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("say why (reason = \"...\"): the reports show it")
        return value.strip()

    @field_validator("category")
    @classmethod
    def _category(cls, value: str) -> str:
        if not any(glob(value, c) for c in CATEGORIES):
            raise ValueError(f"{value!r} names no category (categories: {', '.join(CATEGORIES)})")
        return value

    @field_validator("until", mode="before")
    @classmethod
    def _until(cls, value: Any) -> Any:
        if value is None:
            return None
        if not isinstance(value, str | date | datetime):
            raise ValueError("write a date such as 2026-12-07")
        try:
            return parse_when(value, now=datetime.now(timezone.utc), end_of_day=True, relative=False)
        except UserError as exc:
            raise ValueError(str(exc)) from None

    @model_validator(mode="after")
    def _not_everything(self) -> IgnoreRule:
        if self.category == "*" and self.item == "*":
            raise ValueError("this rule would ignore every change: give a category or an item")
        return self

    def describe(self, number: int) -> str:
        """``[[ignore]] #2 (gpu-process *)`` for messages; ``number`` counts from 1."""
        return f"[[ignore]] #{number} ({self.category} {self.item})"

    def applies_to(self, host: str, groups: Mapping[str, Sequence[str]]) -> bool:
        if not self.hosts and not self.groups:
            return True
        if any(fnmatchcase(host, pattern) for pattern in self.hosts):
            return True
        return any(host in members(groups, group) for group in self.groups)

    def names(self, category: str, item: str, label: str = "") -> bool:
        return glob(self.category, category) and names_item(self.item, item, label)


def members(groups: Mapping[str, Sequence[str]], group: str, seen: frozenset[str] = frozenset()) -> set[str]:
    """The hosts of a config group, groups inside it included (the config refuses cycles)."""
    found: set[str] = set()
    for name in groups.get(group, ()):
        if name in groups and name not in seen:
            found |= members(groups, name, seen | {group})
        else:
            found.add(name)
    return found


@dataclass(frozen=True)
class Ignoring:
    """The rules for one run: which apply to which host, and which ever named something."""

    rules: Sequence[IgnoreRule]
    groups: Mapping[str, Sequence[str]]
    now: datetime

    def live(self, number: int) -> bool:
        until = self.rules[number - 1].until
        return until is None or until > self.now

    def in_scope(self, host: str) -> list[int]:
        """Numbers (from 1) of the rules that apply to ``host``, expired ones included."""
        return [n for n, rule in enumerate(self.rules, 1) if rule.applies_to(host, self.groups)]

    def first(self, host: str, category: str, item: str, label: str = "") -> int | None:
        """The number of the first live rule for ``host`` that names the fact, else of the
        first expired one (so the change says its rule expired), else None."""
        named = [n for n in self.in_scope(host) if self.rules[n - 1].names(category, item, label)]
        return next((n for n in named if self.live(n)), named[0] if named else None)

    def waiver(self, number: int) -> Waiver:
        rule = self.rules[number - 1]
        return Waiver("ignored", rule.reason, until=rule.until, rule=rule.describe(number))

    def expired_note(self, number: int) -> str:
        rule = self.rules[number - 1]
        until = shown(rule.until) if rule.until else "?"
        return f"ignore rule expired {until}: {rule.describe(number)}, {rule.reason}"


def ignore_changes(changes: list[Change], ignoring: Ignoring, host: str) -> tuple[list[Change], set[int]]:
    """``changes`` with those a live rule names marked ignored (an expired rule's marked
    as counting again), and the numbers of the rules that named something."""
    used: set[int] = set()
    out: list[Change] = []
    for change in changes:
        number = ignoring.first(host, change.category, str(change.item), change.label)
        if number is None:
            out.append(change)
            continue
        used.add(number)
        if ignoring.live(number):
            out.append(replace(change, waiver=ignoring.waiver(number)))
        elif change.drift:
            out.append(replace(change, lapsed=ignoring.expired_note(number)))
        else:
            out.append(change)
    return out, used
