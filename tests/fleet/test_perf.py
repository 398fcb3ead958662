"""Fleet odd-one-out on perf figures: a robust z-score against the fleet's median, GPUs by
position, never a vote on numbers that differ on every host."""

from __future__ import annotations

from driftwatch.fleet.compare import compare_fleet
from tests.diff.builders import make_snapshot
from tests.perf_builders import perf_facts


def fleet(**slow: dict[int, float]) -> dict[str, object]:
    hosts = {}
    for i in range(10):
        name = f"gpu{i:02d}"
        # Healthy hosts differ by a percent or two, as real ones do.
        jitter = {g: 1.0 + ((i * 7 + g * 3) % 5 - 2) * 0.006 for g in range(8)}
        jitter.update(slow.get(name, {}))
        hosts[name] = make_snapshot(host=name, perf=perf_facts(scale=jitter, cpu=(5.0 + i % 3, 5.5)))
    return hosts


def test_a_host_whose_gpu_is_slow_is_the_odd_one_out() -> None:
    result = compare_fleet(fleet(gpu07={5: 0.77}))
    perf = [f for f in result.findings if f.category == "perf"]
    assert {f.item for f in perf} == {f"gpu[5].{n}" for n in ("gemm_bf16", "gemm_fp8", "hbm_copy", "h2d", "d2h")}
    gemm = next(f for f in perf if f.item == "gpu[5].gemm_bf16")
    assert gemm.severity.value == "high" and [h for h, _ in gemm.outliers] == ["gpu07"]
    assert gemm.explanation.startswith("bf16 GEMM on GPU 5 (H200): gpu07 614 TFLOP/s (23% below, robust z ")
    assert gemm.explanation.endswith("against the median 796 TFLOP/s of 10 hosts")
    assert result.summary["outlier_hosts"][0] == "gpu07"


def test_a_fleet_of_healthy_hosts_agrees() -> None:
    result = compare_fleet(fleet())
    assert [f for f in result.findings if f.category == "perf" or f.item == "perf"] == []


def test_five_percent_below_is_not_enough_even_with_a_tight_fleet() -> None:
    result = compare_fleet(fleet(gpu03={i: 0.96 for i in range(8)}))
    assert [f for f in result.findings if f.category == "perf"] == []


def test_a_host_whose_gpu_section_failed_is_named() -> None:
    hosts = fleet()
    hosts["gpu04"] = make_snapshot(host="gpu04", perf=perf_facts(gpu_status="error", reason="torch failed to start"))
    result = compare_fleet(hosts)
    section = next(f for f in result.findings if f.item == "gpu" and f.category == "perf")
    assert [h for h, _ in section.outliers] == ["gpu04"]


def test_hosts_not_asked_for_perf_are_no_outliers() -> None:
    hosts = fleet()
    for name in ("gpu08", "gpu09"):
        hosts[name] = make_snapshot(host=name)
    assert [f for f in compare_fleet(hosts).findings if "perf" in (f.category, f.item)] == []
