"""The perf probe's figures through the diff: a confirmed drop is a symptom with what the
run recorded beside it; what was not measured is said once and never read as slower."""

from __future__ import annotations

from typing import Any

import pytest

from driftwatch.diff import Change
from driftwatch.diff.perf import EXPLAINED_BY, step
from driftwatch.explain import diff_snapshots
from driftwatch.facts.figures import below_siblings, fleet_outliers
from driftwatch.facts.figures import VERSION
from tests.diff.builders import make_snapshot
from tests.perf_builders import GPUS, perf_facts


def perf_changes(old: dict[str, Any], new: dict[str, Any]) -> list[Change]:
    result = diff_snapshots(make_snapshot(perf=old), make_snapshot(minutes=60, perf=new))
    return [c for c in result.changes if c.category == "perf" or c.item == "perf"]


def test_an_unchanged_host_measured_twice_has_no_perf_change() -> None:
    first = perf_facts()
    again = perf_facts(scale={i: 1.0 + (i % 3 - 1) * 0.01 for i in range(8)}, cpu=(4.1, 6.3), previous=first)
    assert perf_changes(first, again) == []


def test_a_power_capped_gpu_is_a_high_drop_with_what_the_run_saw() -> None:
    old = perf_facts()
    new = perf_facts(scale={5: 0.77}, throttle={5: {"SW_POWER_CAP": 1.0}}, power_limit={5: 450.0}, previous=old)
    changes = perf_changes(old, new)
    gemm = next(c for c in changes if c.item == f"gpu.{GPUS[5]}.gemm_bf16")
    assert gemm.severity.value == "high" and gemm.drift
    assert gemm.label == "bf16 GEMM on GPU 5 (H200, 00000000:68:00.0)"
    said, _, known_bad = gemm.explanation.partition(" — ")
    assert said == (
        "bf16 GEMM on GPU 5 (H200, 00000000:68:00.0) −23% (617 vs 798 TFLOP/s), confirmed by a re-measurement; "
        "throttle reason SW_POWER_CAP (new) during the run; power limit 700 W → 450 W; "
        "SM clock during the run 1980 MHz → 1564.2 MHz")
    # The host's own GPUs say it too (rules/perf.py), and rank it as evidence.
    assert known_bad.startswith("known-bad state (observed): bf16 GEMM on GPU 5 (H200, 00000000:68:00.0) is 23% below "
                                "its siblings (614 vs a median of 798 TFLOP/s)")
    assert gemm.evidence > 0
    assert (gemm.old, gemm.new) == ("798 TFLOP/s", "−20%")
    # Every figure of GPU 5 dropped, no other GPU's did.
    assert {c.item for c in changes if c.drift} == {f"gpu.{GPUS[5]}.{n}" for n in
                                                    ("gemm_bf16", "gemm_fp8", "hbm_copy", "h2d", "d2h")}


def test_a_drop_with_nothing_recorded_says_hardware() -> None:
    old = perf_facts()
    new = perf_facts(scale={2: 0.6}, previous=old)
    new["gpus"][GPUS[2]]["figures"]["gemm_bf16"]["during"]["sm_clock_mhz"] = 1980.0
    gemm = next(c for c in perf_changes(old, new) if c.item == f"gpu.{GPUS[2]}.gemm_bf16")
    assert gemm.severity.value == "high"
    assert gemm.explanation.partition(" — ")[0].endswith(
        "no change this run recorded explains it (clocks, power limit, throttling, link and software as before): hardware?")


def test_a_driver_upgrade_is_named_beside_the_drop() -> None:
    old = perf_facts()
    new = perf_facts(scale={i: 0.72 for i in range(8)}, context={**old["gpu"]["context"], "driver": "595.71.05"},
                     previous=old)
    gemm = next(c for c in perf_changes(old, new) if c.item == f"gpu.{GPUS[0]}.gemm_bf16")
    assert "driver 590.48.01 → 595.71.05" in gemm.explanation


def test_an_all_reduce_drop_names_nccls_environment() -> None:
    old = perf_facts()
    new = perf_facts(busbw=328.0, previous=old)
    new["all_reduce"]["env"] = {"NCCL_NVLS_ENABLE": "0"}
    change = next(c for c in perf_changes(old, new) if c.item == "all_reduce")
    assert change.severity.value == "high"
    assert change.explanation.startswith("NCCL all-reduce busbw −31% (329 vs 478 GB/s), confirmed")
    assert "NCCL_NVLS_ENABLE 1 → 0" in change.explanation


def test_a_drop_no_remeasurement_confirmed_is_context() -> None:
    old = perf_facts()
    new = perf_facts(scale={1: 0.7}, remeasure=False, previous=old)
    changes = perf_changes(old, new)
    assert changes and not any(c.drift for c in changes)
    assert "no re-measurement was taken: not counted" in changes[0].explanation


def test_refused_gpus_are_one_context_line_never_slower() -> None:
    old = perf_facts()
    new = perf_facts(gpu_status="refused", reason="GPU 3 busy: sglang pid 4411, 71.2 GiB", previous=old)
    changes = perf_changes(old, new)
    assert len(changes) == 1 and not changes[0].drift
    assert changes[0].explanation == ("perf GPU section refused: GPU 3 busy: sglang pid 4411, 71.2 GiB; its figures are "
                                      "not compared this time")


def test_a_gpu_whose_figures_failed_is_one_high_line() -> None:
    old = perf_facts()
    new = perf_facts(previous=old)
    for name in new["gpus"][GPUS[3]]["figures"]:
        new["gpus"][GPUS[3]]["figures"][name] = {"status": "error", "reason": "RuntimeError: CUDA error: unspecified launch failure"}
    changes = perf_changes(old, new)
    assert len(changes) == 1
    assert changes[0].severity.value == "high" and changes[0].drift
    assert changes[0].explanation.startswith("bf16 GEMM, fp8 GEMM, HBM copy, host-to-device copy, device-to-host copy "
                                             "on GPU 3 (H200, 00000000:48:00.0) could not be measured (error)")


def test_a_gpu_off_the_bus_is_said() -> None:
    old = perf_facts()
    new = perf_facts(gpus=8, previous=old)
    del new["gpus"][GPUS[7]]
    changes = perf_changes(old, new)
    assert len(changes) == 1 and changes[0].severity.value == "high"
    assert "not in this run (the GPU is not listed: off the bus?)" in changes[0].explanation


def test_an_fp8_gemm_the_gpu_cannot_run_is_no_change() -> None:
    old, new = perf_facts(), perf_facts()
    for facts in (old, new):
        for gpu in facts["gpus"].values():
            gpu["figures"]["gemm_fp8"] = {"status": "skipped", "reason": "fp8 needs compute capability 8.9 or newer"}
    assert perf_changes(old, new) == []


def test_figures_of_another_probe_version_are_not_compared() -> None:
    old = perf_facts()
    new = perf_facts(scale={i: 0.9 for i in range(8)})
    new["version"] = VERSION + 1
    changes = perf_changes(old, new)
    assert len(changes) == 1 and not changes[0].drift and "probe's version changed" in changes[0].explanation


def test_perf_asked_for_on_one_side_only_is_context() -> None:
    with_perf = make_snapshot(perf=perf_facts())
    without = make_snapshot(minutes=60)
    for old, new in ((with_perf, without), (without, with_perf)):
        result = diff_snapshots(old, new)
        assert not result.drift
        assert [c.item for c in result.context_changes] == ["perf"]


def test_a_faster_run_is_context() -> None:
    old = perf_facts()
    new = perf_facts(scale={i: 1.3 for i in range(8)}, previous=old)
    changes = perf_changes(old, new)
    assert changes and not any(c.drift for c in changes) and "faster than its history" in changes[0].explanation


@pytest.mark.parametrize(("change", "shown"), [(-0.231, "−20%"), (-0.049, "−0%"), (-0.5, "−50%"), (0.12, "+10%")])
def test_step(change: float, shown: str) -> None:
    assert step(change) == shown


def test_siblings_and_fleet_judges() -> None:
    values = {f"g{i}": 800.0 for i in range(7)} | {"g7": 750.0}
    assert set(below_siblings(values)) == {"g7"}
    assert below_siblings({"a": 800.0, "b": 750.0}).keys() == {"b"}
    assert below_siblings({"a": 800.0}) == {}
    hosts = {f"h{i}": 800.0 + i for i in range(9)} | {"h9": 700.0}
    odd = fleet_outliers(hosts)
    assert set(odd) == {"h9"} and odd["h9"].z is not None and odd["h9"].z < -3.5
    assert fleet_outliers({"a": 800.0, "b": 100.0}) == {}  # two hosts: no majority
    assert fleet_outliers({f"h{i}": 800.0 + 10 * i for i in range(9)} | {"h9": 770.0}) == {}  # within 5%


def test_every_kind_has_its_explaining_categories() -> None:
    assert set(EXPLAINED_BY) == {"gpu", "link", "all_reduce", "cpu"}
