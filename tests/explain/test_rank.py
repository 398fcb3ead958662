from __future__ import annotations

from typing import Any

from driftwatch.diff import Severity

from driftwatch.explain import diff_snapshots
from driftwatch.diff.change import Change
from driftwatch.explain.rank import rank_changes
from driftwatch.model import ProbeStatus
from tests.diff.builders import GPU0, GPU1, SRT, baseline, dists, failed, make_snapshot
from tests.diff.test_gpu import grab


def mixed(f: dict[str, Any]) -> None:
    f["files"]["files"][f"{SRT}/server_args.py"].update(mtime=1.0)  # info: touched
    dists(f)["numpy"]["version"] = "2.1.4"  # low
    f["files"]["files"][f"{SRT}/managers/scheduler.py"].update(sha256="e" * 64)  # medium file
    dists(f)["flashinfer-python"]["record_sha256"] = "r2"  # medium focus package
    f["git"]["repos"]["~/sglang"]["head"] = "a" * 40  # high git
    grab(f, GPU0, 22528)  # high gpu-process
    dists(f)["sgl-kernel"]["version"] = "0.3.17"  # high focus package
    f["cuda"]["nccl"]["distributions"]["nvidia-nccl-cu12"] = "2.28.3"  # high nccl
    f["gpu"]["gpus"].pop(GPU1)  # critical gpu
    f["gpu"]["driver_version"] = "595.71.05"  # critical driver


def test_mixed_scenario_ranking() -> None:
    facts = baseline()
    mixed(facts)
    new = make_snapshot(minutes=60, logs=failed(ProbeStatus.timeout, "timed out"), **facts)
    old = make_snapshot(logs={"server_args": {"mem_fraction_static": 0.88}})
    order = [(c.severity.value, c.category, c.item) for c in diff_snapshots(old, new).changes]
    assert order == [
        # Evidence first: sgl-kernel 0.3.17 breaks sglang's pin (a known-bad state), where the
        # driver and the missing GPU merely changed.
        ("high", "package", "sgl-kernel"),
        ("critical", "driver", "driver"),
        ("critical", "gpu", GPU1),
        ("high", "nccl", "nvidia-nccl-cu12"),
        ("high", "gpu-process", f"{GPU0}:10291"),
        ("high", "git", "~/sglang"),
        ("medium", "package", "flashinfer-python"),
        ("low", "package", "numpy"),
        # A probe that now fails is a symptom: the report heads with it, the causes rank above it.
        ("high", "probe", "logs"),
        ("info", "file", f"{SRT}/server_args.py"),
    ]


def test_magnitude_then_stable_order_within_a_rank() -> None:
    def change(item: str, magnitude: float) -> Change:
        return Change("file", item, None, None, Severity.low, item, magnitude=magnitude)

    ranked = rank_changes([change("a", 1.0), change("b", 2.0), change("c", 1.0), change("d", 1.0)])
    assert [c.item for c in ranked] == ["b", "a", "c", "d"]


def test_run_configuration_ranks_above_packages() -> None:
    launch = Change("launch-arg", "mem_fraction_static", 0.88, 0.55, Severity.high, "x")
    pkg = Change("package", "torch", "1", "2", Severity.high, "y", focus=True)
    assert rank_changes([pkg, launch]) == [launch, pkg]


def test_summary() -> None:
    facts = baseline()
    mixed(facts)
    result = diff_snapshots(make_snapshot(), make_snapshot(minutes=60, **facts))
    summary = result.summary
    # The touched file (identical content) is context: shown, never counted as drift. The
    # edited scheduler.py came with the moved HEAD (clean tree): one finding, the commit's.
    assert len(result.changes) == 9 and summary["total"] == 8 and summary["context"] == 1
    assert summary["counts"] == {"critical": 2, "high": 4, "medium": 1, "low": 1, "info": 0}
    assert [c.item for c in result.context_changes] == [f"{SRT}/server_args.py"]
    assert summary["most_likely_cause"].startswith("sgl-kernel 0.3.16.post4 → 0.3.17")
    assert summary["known_bad"] == 1 and result.findings[0].rule == "unmet-requirement"
    assert (
        summary["old"]["taken_at"] == "2026-02-19T10:00:00+00:00"
        and summary["new"]["host"] == "gpu01"
    )
    assert summary["different_hosts"] is False
    assert result.drift
    as_json = result.to_json()
    assert set(as_json["changes"][0]) == {
        "category",
        "item",
        "old",
        "new",
        "severity",
        "explanation",
        "drift",
        "status",  # drift, context, accepted or ignored
        "waiver",  # who accepted it or which rule ignores it, and why
        "lapsed",  # why an accepted or ignored change counts again
        "rule",  # the rule of a known-bad state's line of its own
        "role",  # cause, or symptom: what broke, which the causes explain
    }
    assert as_json["changes"][0]["status"] == "drift" and as_json["changes"][0]["waiver"] is None


def test_identical_snapshots_report_nothing() -> None:
    result = diff_snapshots(make_snapshot(), make_snapshot(minutes=5))
    assert result.changes == [] and not result.drift and result.summary["most_likely_cause"] is None
