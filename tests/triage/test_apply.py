"""Decisions laid over an explained diff: a known-bad state is decided with the changes that
produced it, and what is part of an accepted change is accepted with it."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from driftwatch.diff import Change, Severity
from driftwatch.explain import DiffResult, diff_snapshots
from driftwatch.report.diff import headline
from driftwatch.rules.finding import Finding
from driftwatch.triage.accept import Acceptance, select
from driftwatch.triage.apply import triage
from driftwatch.triage.ignore import Ignoring
from tests.diff.builders import GPU0, baseline, dists, make_snapshot

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)


def accept(result: DiffResult, patterns: list[str]) -> DiffResult:
    chosen, unmatched = select(result.changes, patterns)
    assert chosen and not unmatched, [c.item for c in result.changes]
    book = [Acceptance.of(c, reason="rollout", by="alice@ops", at=NOW - timedelta(hours=1), until=None) for c in chosen]
    return triage(result, host="gpu01", ignoring=Ignoring(rules=[], groups={}, now=NOW), acceptances=book)


def test_a_known_bad_state_is_accepted_with_the_change_that_produced_it() -> None:
    new = baseline()
    dists(new)["sgl-kernel"]["version"] = "0.3.17"  # sglang pins sgl-kernel==0.3.16.post4
    result = diff_snapshots(make_snapshot(**baseline()), make_snapshot(minutes=60, **new))
    assert [f.rule for f in result.problems] == ["unmet-requirement"]
    decided = accept(result, ["sgl-kernel"])
    assert not decided.drift and decided.problems == []
    assert [f.rule for f in decided.settled] == ["unmet-requirement"]
    assert decided.summary["known_bad"] == 0
    assert decided.to_json()["known_bad_settled"][0]["rule"] == "unmet-requirement"
    accepted = decided.with_status("accepted")
    assert "known-bad state (predicted)" in accepted[0].explanation  # shown with the change it came with


def test_a_known_bad_state_with_a_line_of_its_own_is_accepted_by_its_rules_name() -> None:
    old, new = baseline(), baseline()
    old["gpu"]["gpus"][GPU0]["pcie_gen"] = new["gpu"]["gpus"][GPU0]["pcie_gen"] = 3
    new["gpu"]["gpus"][GPU0]["volatile"]["utilization_gpu_pct"] = 97
    result = diff_snapshots(make_snapshot(**old), make_snapshot(minutes=60, **new))
    assert [f.rule for f in result.problems] == ["pcie-link-degraded"]
    decided = accept(result, ["pcie-link-degraded"])
    assert not decided.drift and decided.problems == [] and len(decided.settled) == 1


def test_accepting_a_package_accepts_the_library_it_ships() -> None:
    package = Change("package", "nvidia-nccl-cu12", "2.27.3", "2.27.7", Severity.high, "NCCL 2.27.3 → 2.27.7")
    library = Change("nccl", "libnccl.so.2 (server)", "ab12", "cd34", Severity.high, "libnccl.so.2 rebuilt",
                     part_of=(("package", "nvidia-nccl-cu12"),))
    other = Change("cuda", "libcublas.so.12 (server)", "ab12", "cd34", Severity.high, "libcublas.so.12 rebuilt")
    result = DiffResult(changes=[package, library, other], summary={})
    decided = accept(result, ["nvidia-nccl-cu12"])
    status = {c.item: c.status for c in decided.changes}
    assert status == {"nvidia-nccl-cu12": "accepted", "libnccl.so.2 (server)": "accepted", "libcublas.so.12 (server)": "drift"}
    [lib] = [c for c in decided.changes if c.item == "libnccl.so.2 (server)"]
    assert lib.waiver is not None and lib.waiver.reason == "with package nvidia-nccl-cu12: rollout"


def test_an_open_known_bad_state_is_named_in_the_headline_even_without_drift() -> None:
    touched = Change("file", "/a.py", 1, 2, Severity.info, "/a.py touched, same content", context=True)
    state = Finding(Severity.high, "flashinfer's JIT cache predates its reinstall", "rm -rf ~/.cache/flashinfer",
                    "ref", (("file", "/b"),), "k", rule="stale-compile-cache")
    result = DiffResult(changes=[touched], summary={"total": 0}, findings=[state])
    assert headline(result) == (
        "no drift (1 context finding that changes nothing), but a new known-bad state: "
        "flashinfer's JIT cache predates its reinstall"
    )


def test_accepting_an_image_accepts_the_packages_it_carries() -> None:
    inner = Change("package", "sgl-kernel", "0.3.16", "0.3.17", Severity.high, "sgl-kernel 0.3.16 → 0.3.17")
    image = Change("process", "image lmsysorg/sglang:latest", "sha256:59ef", "sha256:cc75", Severity.high, "image moved",
                   carries=(("package", "sgl-kernel"),))
    decided = accept(DiffResult(changes=[image, inner], summary={}), ["image*"])
    assert {c.item: c.status for c in decided.changes} == {"image lmsysorg/sglang:latest": "accepted", "sgl-kernel": "accepted"}
