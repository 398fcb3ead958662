"""GPU power caps below the default, and clocks held down while the GPU idles."""

from __future__ import annotations

from typing import Any

from driftwatch.severity import Severity
from tests.diff.builders import GPU0, GPU1
from tests.rules.builders import baseline, found, make_snapshot, not_run

IDLE = {name: False for name in ("gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown",
                                 "sync_boost", "sw_thermal_slowdown", "hw_thermal_slowdown",
                                 "hw_power_brake_slowdown", "display_clock_setting")}


def host(reasons: dict[str, bool] | None = None, draw: float = 75.3, util: int = 0, **gpu0: Any) -> dict[str, Any]:
    facts = baseline()
    for uuid in (GPU0, GPU1):
        gpu = facts["gpu"]["gpus"][uuid]
        gpu.update(power_enforced_limit_w=700.0, power_default_limit_w=700.0, power_max_limit_w=700.0)
        gpu["volatile"].update(pstate="P0", clock_event_reasons={**IDLE, "gpu_idle": True})
    gpu = facts["gpu"]["gpus"][GPU0]
    gpu.update(gpu0)
    gpu["volatile"].update(power_draw_w=draw, utilization_gpu_pct=util)
    if reasons is not None:
        gpu["volatile"]["clock_event_reasons"] = {**IDLE, **reasons}
    return facts


def test_a_power_limit_below_the_default() -> None:
    [finding] = found("power-limit-below-default", make_snapshot(**host(power_limit_w=450.0)))
    assert finding.severity is Severity.medium and finding.subjects == (("gpu", GPU0),) and not finding.observed
    assert finding.why.startswith("GPU 0 (H200, 00000000:83:00.0) runs with a power limit of 450 W, below its "
                                  "default 700 W: under load it lowers its clocks")
    assert finding.fix.startswith("nvidia-smi -i 0 -pl 700")
    assert found("power-limit-below-default", make_snapshot(**host())) == []
    assert "no power limit and default" in not_run("power-limit-below-default", make_snapshot())


def test_a_power_brake_asserted_while_idle_is_high_and_observed() -> None:
    [finding] = found("clocks-held-while-idle", make_snapshot(**host({"hw_power_brake_slowdown": True,
                                                                        "hw_slowdown": True})))
    assert finding.severity is Severity.high and finding.observed and finding.key == f"{GPU0}:hw_power_brake_slowdown"
    assert finding.why.startswith("GPU 0 (H200, 00000000:83:00.0) reports hw_power_brake_slowdown while idle "
                                  "(0% busy, 75.3 W of 700.0 W, P0): the external power-brake signal is asserted")
    assert "ipmitool sel list" in finding.fix


def test_a_brake_under_load_is_not_an_idle_brake() -> None:
    assert found("clocks-held-while-idle", make_snapshot(**host({"hw_slowdown": True}, util=100))) == []
    busy = host({"hw_slowdown": True})
    busy["gpu"]["processes"] = {f"{GPU0}:10291": {"gpu_uuid": GPU0, "pid": 10291, "name": "python3", "used_mib": 9000}}
    assert found("clocks-held-while-idle", make_snapshot(**busy)) == []


def test_a_sw_power_cap_counts_only_where_the_cap_binds() -> None:
    # The real GeForce RTX 2080 SUPER capture: SW power cap at P8, 39 W of 250 W: a transition.
    assert found("clocks-held-while-idle", make_snapshot(**host({"sw_power_cap": True}, draw=39.3))) == []
    [finding] = found("clocks-held-while-idle", make_snapshot(**host({"sw_power_cap": True}, draw=98.0,
                                                                       power_limit_w=100.0,
                                                                       power_enforced_limit_w=100.0)))
    assert finding.severity is Severity.medium and "at or below what the GPU draws doing nothing" in finding.why


def test_unknown_reasons_are_not_run_never_not_active() -> None:
    facts = host()
    for gpu in facts["gpu"]["gpus"].values():
        gpu["volatile"]["clock_event_reasons"] = None
    facts["gpu"]["clock_reasons_error"] = "this driver knows neither clocks_event_reasons nor clocks_throttle_reasons"
    assert "knows neither" in not_run("clocks-held-while-idle", make_snapshot(**facts))
