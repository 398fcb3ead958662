"""Alert once per new drift: remember what was last alerted, per host and baseline.

The state file ``<store>/<host folder>/.alert-<baseline>.json`` holds the fingerprint of the
change set last alerted. A check alerts when the fingerprint changes (new or different
drift) and sends one "resolved" when the host is back on its baseline; the same drift
seen again stays quiet.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from enum import Enum

from driftwatch.diff import Change
from driftwatch.rules.finding import Finding
from driftwatch.store import SnapshotStore, host_dir_name


class AlertKind(str, Enum):
    drift = "drift"
    resolved = "resolved"


def fingerprint(changes: list[Change], known_bad: list[Finding] | None = None) -> str | None:
    """A stable digest of what drifted and of the known-bad states new against the baseline
    (a worse one than the baseline's is new, so it alerts even with the same changes); None
    when nothing did. Ranking order is ignored."""
    keys = [json.dumps([c.category, c.item, c.old, c.new], sort_keys=True, default=str) for c in changes]
    keys += [json.dumps(["known-bad", f.rule, f.key, f.severity.value]) for f in known_bad or []]
    if not keys:
        return None
    return hashlib.sha256("\n".join(sorted(keys)).encode()).hexdigest()


@dataclass
class AlertState:
    """The fingerprint last alerted for one host and baseline, kept in the host's store folder."""

    store: SnapshotStore
    host: str
    name: str  # the state file's name in the host folder

    @classmethod
    def for_host(cls, store: SnapshotStore, host: str, baseline: str) -> AlertState:
        return cls(store, host, f".alert-{host_dir_name(baseline)}.json")

    def last(self) -> str | None:
        raw = self.store.read_state(self.host, self.name)
        try:
            data = json.loads(raw) if raw is not None else None
        except ValueError:
            return None  # a damaged state: alert again rather than never
        value = data.get("fingerprint") if isinstance(data, dict) else None
        return value if isinstance(value, str) else None

    def decide(self, current: str | None) -> AlertKind | None:
        """What to send now, given the current fingerprint."""
        last = self.last()
        if current == last:
            return None
        return AlertKind.drift if current is not None else AlertKind.resolved

    def remember(self, current: str | None) -> None:
        """Record what was alerted; StoreError if the store cannot take it (the alert may repeat)."""
        self.store.write_state(self.host, self.name, json.dumps({"fingerprint": current}).encode())
