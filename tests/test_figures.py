"""The perf figures' noise model: when a lower figure is a drop, and what history is kept."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from driftwatch.facts.figures import (
    MIN_HISTORY,
    NEW_LEVEL,
    NOISE_FLOOR,
    VERSION,
    WINDOW,
    carry,
    figures,
    floors,
    judge,
    kind_of,
    split_key,
    threshold,
    window,
)

RUNS = Path(__file__).resolve().parent / "fixtures" / "perf" / "cpu_runs_loaded_2core.json"
UUID = "GPU-5a1b"


def fig(value: float, *, spread: float = 0.0, remeasured: float | None = None, method: str = "bf16 8192",
        unit: str = "TFLOP/s") -> dict[str, Any]:
    return {"status": "ok", "value": value, "p10": value * (1 - spread), "p90": value * (1 + spread), "n": 10,
            "unit": unit, "method": method, "remeasured": remeasured}


def facts(gemm: dict[str, Any] | None = None, *, history: dict[str, Any] | None = None, cpu: float | None = None,
          context: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"version": VERSION, "cpu": {"status": "ok", "figures": {}},
                           "gpu": {"status": "ok", "context": context or {"torch": "2.8.0"}},
                           "gpus": {UUID: {"index": 5, "name": "NVIDIA H200", "figures": {}}}, "all_reduce": None}
    if gemm is not None:
        out["gpus"][UUID]["figures"]["gemm_bf16"] = gemm
    if cpu is not None:
        out["cpu"]["figures"]["gemm"] = fig(cpu, unit="GFLOP/s", method="numpy")
    out["history"] = history or {}
    return out


KEY = f"gpu.{UUID}.gemm_bf16"


def test_keys_and_kinds() -> None:
    assert split_key(KEY) == (UUID, "gemm_bf16")
    assert split_key("cpu.copy") == (None, "cpu.copy")
    assert [kind_of(k) for k in ("cpu.gemm", KEY, f"gpu.{UUID}.h2d", "all_reduce")] == ["cpu", "gpu", "link", "all_reduce"]
    assert set(figures(facts(fig(1.0), cpu=2.0))) == {KEY, "cpu.gemm"}


def test_a_quarter_lower_confirmed_by_the_remeasurement_is_a_drop() -> None:
    verdict = judge([798.0], "gpu", fig(798.0), fig(612.0, remeasured=618.0))
    assert verdict is not None and verdict.drop
    assert verdict.value == 618.0  # the better of the two measurements
    assert verdict.change == pytest.approx(618 / 798 - 1)
    assert verdict.threshold == pytest.approx(1 - math.exp(-3 * NOISE_FLOOR["gpu"]))


def test_a_drop_the_remeasurement_does_not_confirm_is_not_a_drop() -> None:
    verdict = judge([798.0], "gpu", fig(798.0), fig(612.0, remeasured=790.0))
    assert verdict is not None and verdict.below and not verdict.confirmed and not verdict.drop
    unmeasured = judge([798.0], "gpu", fig(798.0), fig(612.0))
    assert unmeasured is not None and unmeasured.below and not unmeasured.drop


def test_never_less_than_five_percent() -> None:
    steady = [800.0, 800.5, 799.5, 800.2, 799.8, 800.1]
    sigma, drop = threshold(steady, "gpu")
    assert sigma < 0.001 and drop == 0.05
    verdict = judge(steady, "gpu", None, fig(765.0, remeasured=764.0))
    assert verdict is not None and not verdict.drop  # 4.4% lower
    verdict = judge(steady, "gpu", None, fig(755.0, remeasured=756.0))
    assert verdict is not None and verdict.drop  # 5.6% lower


def test_a_noisy_history_widens_the_threshold_to_three_sigma() -> None:
    noisy = [100.0, 80.0, 120.0, 90.0, 110.0, 95.0]
    sigma, drop = threshold(noisy, "gpu")
    assert sigma == pytest.approx(0.1445, abs=1e-3)
    assert drop == pytest.approx(1 - math.exp(-3 * sigma))
    assert not judge(noisy, "gpu", None, fig(70.0, remeasured=70.0)).drop  # type: ignore[union-attr]
    assert judge(noisy, "gpu", None, fig(60.0, remeasured=61.0)).drop  # type: ignore[union-attr]


def test_a_wide_spread_between_batches_widens_it_too() -> None:
    tight = judge([100.0], "gpu", fig(100.0), fig(90.0, remeasured=90.0))
    wide = judge([100.0], "gpu", fig(100.0), fig(90.0, spread=0.2, remeasured=90.0))
    assert tight is not None and tight.drop
    assert wide is not None and not wide.drop


def test_nothing_to_compare_with() -> None:
    assert judge([], "gpu", None, fig(1.0)) is None
    assert judge([1.0], "gpu", None, {"status": "error", "reason": "CUDA error"}) is None
    assert judge([1.0], "gpu", None, {"status": "ok", "value": 0}) is None  # a 0 is no figure


def test_the_cpu_noise_floor_holds_for_every_measured_back_to_back_pair() -> None:
    """The design check: on the shared 2-core machine at load 10-13, no consecutive pair of
    the 80 real CPU-section runs would be a drop, not even with its re-measurement as low
    as itself (with one run of history, the noise floor stands)."""
    runs = json.loads(RUNS.read_text())["runs"]
    pairs = 0
    for backend in runs.values():
        for name in ("gemm", "copy"):
            values = [r["figures"][name] for r in backend]
            for before, after in zip(values, values[1:], strict=False):
                after = dict(after, status="ok", remeasured=after["value"])
                verdict = judge([before["value"]], "cpu", dict(before, status="ok"), after)
                assert verdict is not None and not verdict.drop, (name, before, after)
                pairs += 1
    assert pairs == 4 * 2 * 19


def test_carry_keeps_accepted_values_and_leaves_out_a_confirmed_drop() -> None:
    first = facts(fig(800.0))
    first["history"] = carry({}, first)
    assert first["history"][KEY]["values"] == [800.0]
    second = facts(fig(804.0))
    second["history"] = carry(first, second)
    assert second["history"][KEY]["values"] == [800.0, 804.0]
    dropped = facts(fig(600.0, remeasured=610.0))
    dropped["history"] = carry(second, dropped)
    assert dropped["history"][KEY]["values"] == [800.0, 804.0]
    assert dropped["history"][KEY]["pending"] == [610.0]


def test_a_drop_that_holds_becomes_the_new_level() -> None:
    current = facts(fig(800.0))
    current["history"] = carry({}, current)
    for _ in range(NEW_LEVEL):
        nxt = facts(fig(600.0, remeasured=601.0))
        nxt["history"] = carry(current, nxt)
        current = nxt
    assert current["history"][KEY]["values"] == [601.0] * NEW_LEVEL
    assert current["history"][KEY]["pending"] == []


def test_the_window_is_bounded() -> None:
    current = facts(fig(800.0))
    current["history"] = carry({}, current)
    for i in range(WINDOW + 5):
        nxt = facts(fig(800.0 + i % 3))
        nxt["history"] = carry(current, nxt)
        current = nxt
    assert len(current["history"][KEY]["values"]) == WINDOW


@pytest.mark.parametrize("change", ["version", "method", "context"])
def test_another_version_method_or_software_starts_afresh(change: str) -> None:
    first = facts(fig(800.0))
    first["history"] = carry({}, first)
    second = facts(fig(500.0, method="other" if change == "method" else "bf16 8192"),
                   context={"torch": "2.9.0"} if change == "context" else None)
    if change == "version":
        first["version"] = VERSION + 1
    second["history"] = carry(first, second)
    assert second["history"][KEY]["values"] == [500.0]


def test_floors_for_the_next_run() -> None:
    previous = facts(fig(800.0), cpu=10.0)
    previous["history"] = carry({}, previous)
    found = floors(previous)
    assert found[KEY] == pytest.approx(800.0 * math.exp(-3 * NOISE_FLOOR["gpu"]), rel=1e-4)
    assert found["cpu.gemm"] == pytest.approx(10.0 * math.exp(-3 * NOISE_FLOOR["cpu"]), rel=1e-4)
    assert floors(dict(previous, version=VERSION + 1)) == {}


def test_window_falls_back_to_the_snapshots_own_figure() -> None:
    assert window(facts(fig(790.0)), KEY) == [790.0]
    assert window(facts({"status": "error", "reason": "x"}), KEY) == []


def test_a_short_history_uses_the_noise_floor() -> None:
    values = [100.0, 101.0, 99.0, 100.5][: MIN_HISTORY - 1]
    assert threshold(values, "cpu")[0] == NOISE_FLOOR["cpu"]
