"""Prometheus textfile for node_exporter's textfile collector, written atomically.

``prometheus_client.write_to_textfile`` writes a temp file in the same folder and renames
it, so node_exporter never reads half a file.
"""

from __future__ import annotations

import time
from pathlib import Path

from prometheus_client import CollectorRegistry, Gauge, write_to_textfile

from driftwatch.diff import DiffResult, Severity
from driftwatch.model import ProbeStatus, Snapshot
from driftwatch.store import host_dir_name


def write_textfile(
    folder: Path, host: str, *, snapshot: Snapshot | None, result: DiffResult | None, now: float | None = None
) -> Path:
    registry = CollectorRegistry()
    up = Gauge("driftwatch_up", "1 if the host was reached and snapshotted, 0 if not.", ["host"], registry=registry)
    changes = Gauge(
        "driftwatch_drift_changes", "Changes against the baseline, by severity.", ["host", "severity"], registry=registry
    )
    probe_ok = Gauge("driftwatch_probe_ok", "1 if the probe succeeded (or was skipped).", ["host", "probe"], registry=registry)
    checked = Gauge(
        "driftwatch_last_check_timestamp_seconds", "When the check ran (Unix time).", ["host"], registry=registry
    )
    duration = Gauge("driftwatch_snapshot_duration_seconds", "How long the snapshot took.", ["host"], registry=registry)
    up.labels(host).set(1 if snapshot is not None else 0)
    checked.labels(host).set(now if now is not None else time.time())
    if snapshot is not None:
        duration.labels(host).set(snapshot.duration_s)
        for name, record in snapshot.probes.items():
            probe_ok.labels(host, name).set(1 if record.status in (ProbeStatus.ok, ProbeStatus.skipped) else 0)
    if result is not None:
        counts = result.summary["counts"]
        for severity in Severity:
            changes.labels(host, severity.value).set(counts.get(severity.value, 0))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"driftwatch_{host_dir_name(host)}.prom"
    write_to_textfile(str(path), registry)
    return path
