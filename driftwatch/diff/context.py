"""What every rule may consult besides the two fact trees."""

from __future__ import annotations

from dataclasses import dataclass

from driftwatch.diff.change import DiffOptions
from driftwatch.facts.read import Facts, as_dict, normalize_name, ok_facts
from driftwatch.model import Snapshot

__all__ = ["DiffContext", "Facts", "as_dict", "normalize_name", "ok_facts"]


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

