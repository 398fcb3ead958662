from __future__ import annotations

from driftwatch.diff import Severity

from driftwatch.explain import diff_snapshots
from driftwatch.model import ProbeStatus
from tests.diff.builders import failed, make_snapshot


def test_probe_starts_timing_out_is_high_and_its_facts_are_not_removed() -> None:
    hung = failed(ProbeStatus.timeout, "timed out after 10s: nvidia-smi --query-gpu=...")
    changes = diff_snapshots(make_snapshot(), make_snapshot(gpu=hung)).changes
    assert len(changes) == 1
    change = changes[0]
    assert (change.category, change.item, change.old, change.new) == (
        "probe",
        "gpu",
        "ok",
        "timeout",
    )
    assert change.severity is Severity.high
    assert change.explanation.startswith(
        "gpu probe timed out (nvidia-smi hung?): a wedged driver or a GPU in a bad state"
    )


def test_probe_error_and_recovery() -> None:
    broken = failed(ProbeStatus.error, "nvidia-smi: command not found")
    error = diff_snapshots(make_snapshot(), make_snapshot(gpu=broken)).changes
    assert error[0].severity is Severity.high and "command not found" in error[0].explanation
    recovered = diff_snapshots(make_snapshot(gpu=broken), make_snapshot()).changes
    assert [(c.category, c.severity) for c in recovered] == [("probe", Severity.info)]
    assert "recovered" in recovered[0].explanation


def test_probe_missing_from_one_snapshot() -> None:
    old = make_snapshot()
    new = make_snapshot()
    del new.probes["git"]
    changes = diff_snapshots(old, new).changes
    assert [(c.category, c.item, c.severity) for c in changes] == [("probe", "git", Severity.info)]


def test_both_failed_the_same_way_is_no_drift() -> None:
    hung = failed(ProbeStatus.timeout, "timed out")
    assert diff_snapshots(make_snapshot(files=hung), make_snapshot(files=hung)).changes == []


def test_a_failed_system_probe_does_not_make_the_same_host_two_hosts() -> None:
    # Stored under the name used ("h-dwb"), hostname "vm" while it read; this time the system
    # probe failed, so no hostname was read: still one host, no "comparing two different hosts".
    old = make_snapshot(host="h-dwb")
    old.host.hostname = "vm"
    old.probes["system"].facts["hostname"] = "vm"
    new = make_snapshot(host="h-dwb", system=failed(ProbeStatus.error, "no reply from the target"))
    new.host.hostname = None
    assert diff_snapshots(old, new).summary["different_hosts"] is False
    other = make_snapshot(host="h-other", system=failed(ProbeStatus.error, "no reply from the target"))
    other.host.hostname = None
    assert diff_snapshots(old, other).summary["different_hosts"] is True  # names differ, nothing else known
