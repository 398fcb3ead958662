"""Power limits and clocks in the diff: a lower cap names itself with its mechanism, an
unknown reading is never a change to or from "off"."""

from __future__ import annotations

from typing import Any

from driftwatch.diff import Severity
from driftwatch.explain import diff_snapshots
from tests.diff.builders import GPU0, GPU1, baseline, make_snapshot

POWER = {"power_limit_w": 700.0, "power_enforced_limit_w": 700.0, "power_default_limit_w": 700.0,
         "power_max_limit_w": 700.0, "app_clock_graphics_mhz": None, "app_clock_memory_mhz": None,
         "max_clock_sm_mhz": 1980, "max_clock_memory_mhz": 3201}


def host(**gpu0: Any) -> dict[str, Any]:
    facts = baseline()
    for uuid in (GPU0, GPU1):
        facts["gpu"]["gpus"][uuid].update(POWER)
    facts["gpu"].update(clocks_error=None, clock_reasons_error=None)
    facts["gpu"]["gpus"][GPU0].update(gpu0)
    return facts


def diff(old: dict[str, Any], new: dict[str, Any]) -> list[Any]:
    return diff_snapshots(make_snapshot(**old), make_snapshot(minutes=60, **new)).changes


def test_a_power_cap_below_the_default_is_high_and_says_what_it_does() -> None:
    [change] = diff(host(), host(power_limit_w=450.0, power_enforced_limit_w=450.0))
    assert (change.category, change.item, change.severity) == ("gpu", GPU0, Severity.high)
    assert change.explanation.startswith(
        "GPU 0 (H200, 00000000:83:00.0) power limit 700 W → 450 W (default 700 W, max 700 W): a lower cap "
        "(nvidia-smi -pl, or a DCGM/datacenter power policy): under load the GPU lowers its clocks")


def test_a_cap_lifted_back_is_low() -> None:
    [change] = diff(host(power_limit_w=450.0, power_enforced_limit_w=450.0), host())
    assert change.severity is Severity.low and "700 W" in change.explanation and "higher cap" in change.explanation


def test_another_limiter_under_an_unchanged_request() -> None:
    [change] = diff(host(), host(power_enforced_limit_w=500.0))
    assert change.severity is Severity.high
    assert "enforced power limit 700 W → 500 W while the requested limit is 700 W: another limiter" in change.explanation


def test_application_clocks_set() -> None:
    [change] = diff(host(app_clock_graphics_mhz=1410), host(app_clock_graphics_mhz=1100))
    assert change.severity is Severity.medium
    assert change.explanation.startswith("GPU 0 (H200, 00000000:83:00.0) application graphics clock 1410 → 1100 MHz")


def test_a_reading_lost_is_unknown_not_a_change_of_the_setting() -> None:
    lost = host(**{k: None for k in POWER if k != "power_limit_w"})
    lost["gpu"]["clocks_error"] = "nvidia-smi power and clock query failed: exit 2"
    changes = diff(host(), lost)
    assert [(c.item, c.severity) for c in changes] == [("(power limits and clocks)", Severity.info)]
    assert changes[0].explanation == ("GPU power limits and clocks could not be read: nvidia-smi power and clock "
                                      "query failed: exit 2: they are not compared this time")


def test_clock_event_reasons_are_readings_not_drift() -> None:
    old, new = host(), host()
    old["gpu"]["gpus"][GPU0]["volatile"]["clock_event_reasons"] = {"sw_power_cap": False}
    new["gpu"]["gpus"][GPU0]["volatile"]["clock_event_reasons"] = {"sw_power_cap": True}
    assert diff(old, new) == []
