"""What every rule may consult besides the two fact trees."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from driftwatch.diff.change import DiffOptions
from driftwatch.model import ProbeStatus, Snapshot

Facts = dict[str, Any]

_PEP503 = re.compile(r"[-_.]+")


def normalize_name(name: str) -> str:
    """PEP 503 name, so the focus list matches however the user spelled it."""
    return _PEP503.sub("-", name).lower()


@dataclass(frozen=True)
class DiffContext:
    options: DiffOptions
    focus: frozenset[str]
    # Two different machines: identity facts (hostname, boot id, GPU UUIDs) differ by
    # nature, so rules match GPUs by index and call identity differences info.
    different_hosts: bool = False
    # The two snapshots, for rules whose explanation needs another probe's facts (a cache
    # entry and the install time of the package that filled it).
    snapshots: tuple[Snapshot, Snapshot] | None = None

    @classmethod
    def from_options(
        cls, options: DiffOptions, different_hosts: bool = False, snapshots: tuple[Snapshot, Snapshot] | None = None
    ) -> DiffContext:
        focus = frozenset(normalize_name(n) for n in options.focus)
        return cls(options=options, focus=focus, different_hosts=different_hosts, snapshots=snapshots)

    @property
    def volatile(self) -> bool:
        return self.options.include_volatile

    def facts_of(self, probe: str) -> tuple[Facts, Facts]:
        """Another probe's (old, new) facts; empty on both sides unless it is ok on both."""
        if self.snapshots is None:
            return {}, {}
        old, new = (ok_facts(snapshot, probe) for snapshot in self.snapshots)
        return (old, new) if old and new else ({}, {})


def as_dict(value: Any) -> Facts:
    """Facts from a foreign or broken snapshot may hold anything; treat non-dicts as empty."""
    return value if isinstance(value, dict) else {}


def ok_facts(snapshot: Snapshot, probe: str) -> Facts:
    """A probe's facts when it succeeded; {} when it failed or is absent (nothing to read)."""
    record = snapshot.probes.get(probe)
    return record.facts if record is not None and record.status is ProbeStatus.ok else {}
