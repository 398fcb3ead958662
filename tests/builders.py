"""Small, realistic snapshots built in code, for store and CLI tests."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from driftwatch.model import HostIdentity, ProbeRecord, ProbeStatus, Snapshot

T0 = datetime(2026, 2, 19, 10, 0, 0, tzinfo=timezone.utc)


def snapshot(host: str = "gpu01", *, minutes: int = 0, labels: list[str] | None = None, **facts: Any) -> Snapshot:
    probes = {
        "system": ProbeRecord(status=ProbeStatus.ok, facts={"hostname": host, "kernel": "5.15.0-171-generic"}),
        **{name: ProbeRecord(status=ProbeStatus.ok, facts=value) for name, value in facts.items()},
    }
    return Snapshot(
        host=HostIdentity(name=host, address=host, hostname=host),
        taken_at=T0 + timedelta(minutes=minutes),
        duration_s=0.5,
        labels=labels or [],
        probes=probes,
    )
