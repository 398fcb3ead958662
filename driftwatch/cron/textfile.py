"""Prometheus textfile for node_exporter's textfile collector, written atomically.

The file is written to a temp file in the same folder and renamed, so node_exporter never
reads half a file; it is 644 whatever the umask (node_exporter runs as another user). A
temp file left by a killed run is removed by the next one. Label values are host
and probe names shown with ``clean``: the client escapes only ``\\``, ``"`` and newlines,
and a raw control character would reach whoever reads the metrics.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from prometheus_client import CollectorRegistry, Gauge, generate_latest

from driftwatch.cron.info import INFO_LABELS, info_labels
from driftwatch.cron.perf import perf_gauges
from driftwatch.diff import Severity
from driftwatch.diff.canary import changed_prompts
from driftwatch.explain import DiffResult
from driftwatch.errors import UserError
from driftwatch.fileio import clean_stale_temps, make_dir, replace_file
from driftwatch.model import ProbeStatus, Snapshot
from driftwatch.report.safe import clean
from driftwatch.rules.finding import Diagnosis
from driftwatch.store import host_dir_name

PROM_MODE, DIR_MODE = 0o644, 0o755
_TEMP_PREFIX = ".tmp-driftwatch_"  # the folder is shared with other exporters: clean only ours


@dataclass(frozen=True)
class StoreHealth:
    """What the check saw of the snapshot store for one host."""

    unreadable: int = 0  # unreadable snapshot files skipped
    write_ok: bool = True  # False when writing to the store failed (full, read-only...)


def check_textfile_folder(folder: Path) -> None:
    """A one-line UserError now, before connecting, if ``folder`` cannot hold textfiles."""
    if "\0" in str(folder):
        raise UserError(f"--textfile {str(folder)!r}: the path contains a NUL character")
    if folder.exists() and not folder.is_dir():
        raise UserError(f"--textfile {folder}: is a file, not a folder")


def textfile_path(folder: Path, host: str) -> Path:
    return folder / f"driftwatch_{host_dir_name(host)}.prom"


def write_textfile(
    folder: Path, host: str, *, snapshot: Snapshot | None, result: DiffResult | None,
    store: StoreHealth | None = None, now: float | None = None, known_bad: Diagnosis | None = None,
) -> Path:
    registry = CollectorRegistry()
    up = Gauge("driftwatch_up", "1 if the host was reached and snapshotted, 0 if not.", ["host"], registry=registry)
    changes = Gauge(
        "driftwatch_drift_changes", "Changes against the baseline, by severity.", ["host", "severity"], registry=registry
    )
    decided = Gauge(
        "driftwatch_decided_changes", "Changes against the baseline that are not drift by decision: accepted or ignored.",
        ["host", "decision"], registry=registry,
    )
    probe_ok = Gauge("driftwatch_probe_ok", "1 if the probe succeeded (or was skipped).", ["host", "probe"], registry=registry)
    checked = Gauge(
        "driftwatch_last_check_timestamp_seconds", "When the check ran (Unix time).", ["host"], registry=registry
    )
    duration = Gauge("driftwatch_snapshot_duration_seconds", "How long the snapshot took.", ["host"], registry=registry)
    store_errors = Gauge(
        "driftwatch_store_errors", "Unreadable snapshot files of the host seen (and skipped) by the check.", ["host"],
        registry=registry,
    )
    store_write_ok = Gauge(
        "driftwatch_store_write_ok", "0 if writing to the snapshot store failed in the check, else 1.", ["host"],
        registry=registry,
    )
    info = Gauge(
        "driftwatch_info",
        "1, labelled with what the host runs (unknown: empty): the driver, the CUDA torch was built with (else "
        "nvcc's), torch, NCCL (the nvidia-nccl wheel, else libnccl), sglang, sgl-kernel, vllm, flashinfer, GPUs.",
        ["host", *INFO_LABELS], registry=registry,
    )
    label = clean(host)
    doctor = Gauge(
        "driftwatch_doctor_findings", "Known-bad states of the host now (what doctor reports), by severity.",
        ["host", "severity"], registry=registry,
    )
    canary = Gauge(
        "driftwatch_canary_changed",
        "Output canary prompts whose greedy answer changed against the baseline (near-tie flips and a noisy "
        "server's own disagreement excluded); only where this check ran the canary.", ["host"], registry=registry,
    )
    if known_bad is not None:
        for severity, count in known_bad.counts().items():
            doctor.labels(label, severity).set(count)
    up.labels(label).set(1 if snapshot is not None else 0)
    checked.labels(label).set(now if now is not None else time.time())
    health = store or StoreHealth()
    store_errors.labels(label).set(health.unreadable)
    store_write_ok.labels(label).set(1 if health.write_ok else 0)
    if snapshot is not None:
        info.labels(host=label, **info_labels(snapshot)).set(1)
        duration.labels(label).set(snapshot.duration_s)
        for name, record in snapshot.probes.items():
            probe_ok.labels(label, clean(name)).set(1 if record.status in (ProbeStatus.ok, ProbeStatus.skipped) else 0)
        perf_gauges(registry, label, snapshot)
    if result is not None:
        counts = result.summary["counts"]
        for severity in Severity:
            changes.labels(label, severity.value).set(counts.get(severity.value, 0))
        for decision in ("accepted", "ignored"):
            decided.labels(label, decision).set(result.summary.get(decision, 0))
        ran = snapshot is not None and snapshot.probes.get("canary") is not None and \
            snapshot.probes["canary"].status is ProbeStatus.ok
        if ran:
            canary.labels(label).set(changed_prompts(result.changes))
    make_dir(folder, DIR_MODE)
    clean_stale_temps(folder, prefix=_TEMP_PREFIX)
    path = textfile_path(folder, host)
    replace_file(path, generate_latest(registry), mode=PROM_MODE, prefix=_TEMP_PREFIX)
    return path
