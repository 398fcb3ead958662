"""The arithmetic of the perf figures (scripts/perf_math.py), loaded as the targets run it."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "driftwatch" / "probes" / "scripts"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"perf_script_{name}", SCRIPTS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


math = load("perf_math")


def test_busbw_is_algbw_times_two_n_minus_one_over_n_as_nccl_tests() -> None:
    # nccl-tests' doc/PERFORMANCE.md: 8 ranks, 1 GiB in 4.7 ms.
    nbytes, seconds = 1 << 30, 4.7e-3
    algbw, busbw = math.allreduce_gb_s(nbytes, seconds, 8)
    assert algbw == pytest.approx(1073741824 / 4.7e-3 / 1e9)
    assert busbw == pytest.approx(algbw * 2 * 7 / 8)
    assert busbw == pytest.approx(399.8, abs=0.1)


@pytest.mark.parametrize(("ranks", "factor"), [(1, 0.0), (2, 1.0), (4, 1.5), (8, 1.75), (16, 1.875)])
def test_bus_factor(ranks: int, factor: float) -> None:
    assert math.bus_factor(ranks) == factor


def test_bus_factor_refuses_no_rank() -> None:
    with pytest.raises(ValueError):
        math.bus_factor(0)


def test_gemm_tflops_counts_two_flops_per_multiply_add() -> None:
    # 8192^3 bf16 on an H100 SXM at its dense peak (989.4 TFLOP/s) takes 1.111 ms.
    assert math.gemm_tflops(8192, 8192, 8192, 1.1113e-3) == pytest.approx(989.4, rel=1e-3)
    assert math.gemm_tflops(2, 3, 4, 1.0, products=10) == 2 * 2 * 3 * 4 * 10 / 1e12


def test_copy_counts_read_and_write_transfer_counts_one_direction() -> None:
    gib = 1 << 30
    assert math.copy_gb_s(gib, 1.0) == 2 * gib / 1e9  # STREAM's Copy: B read + B written
    assert math.transfer_gb_s(gib, 1.0) == gib / 1e9  # one direction of the link
    assert math.copy_gb_s(gib, 0.5, copies=2) == pytest.approx(8 * gib / 1e9)


def test_quantile_interpolates_like_numpy() -> None:
    values = [10.0, 1.0, 4.0, 3.0, 2.0]
    assert math.quantile(values, 0.5) == 3.0
    assert math.quantile(values, 0.1) == pytest.approx(1.4)
    assert math.quantile(values, 0.9) == pytest.approx(7.6)
    assert math.quantile([5.0], 0.9) == 5.0
    with pytest.raises(ValueError):
        math.quantile([], 0.5)


def test_summary_is_the_median_with_its_spread() -> None:
    figure = math.summary([100.0, 98.0, 102.0, 99.0, 101.0], "TFLOP/s", "bf16")
    assert figure == {"status": "ok", "value": 100.0, "p10": 98.4, "p90": 101.6, "n": 5, "unit": "TFLOP/s",
                      "method": "bf16", "remeasured": None}
