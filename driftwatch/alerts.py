"""Alert once per new drift: remember what was last alerted, per host and baseline.

The state file ``<store>/<host>/.alert-<baseline>.json`` holds the fingerprint of the
change set last alerted. A check alerts when the fingerprint changes (new or different
drift) and sends one "resolved" when the host is back on its baseline; the same drift
seen again stays quiet.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from driftwatch.diff import Change
from driftwatch.store import host_dir_name


class AlertKind(str, Enum):
    drift = "drift"
    resolved = "resolved"


def fingerprint(changes: list[Change]) -> str | None:
    """A stable digest of what drifted; None when nothing did. Ranking order is ignored."""
    if not changes:
        return None
    keys = sorted(json.dumps([c.category, c.item, c.old, c.new], sort_keys=True, default=str) for c in changes)
    return hashlib.sha256("\n".join(keys).encode()).hexdigest()


@dataclass
class AlertState:
    path: Path

    @classmethod
    def for_host(cls, store_root: Path, host: str, baseline: str) -> AlertState:
        return cls(store_root / host_dir_name(host) / f".alert-{host_dir_name(baseline)}.json")

    def last(self) -> str | None:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return None  # no state yet, or a damaged one: alert again rather than never
        value = data.get("fingerprint") if isinstance(data, dict) else None
        return value if isinstance(value, str) else None

    def decide(self, current: str | None) -> AlertKind | None:
        """What to send now, given the current fingerprint."""
        last = self.last()
        if current == last:
            return None
        return AlertKind.drift if current is not None else AlertKind.resolved

    def remember(self, current: str | None) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".tmp-", suffix=".part")
        with os.fdopen(fd, "w") as handle:
            json.dump({"fingerprint": current}, handle)
        os.replace(tmp, self.path)
