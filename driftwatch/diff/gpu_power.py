"""Per-GPU power limits and clocks: the settings that decide how fast a GPU runs under load.

A lower power limit (``nvidia-smi -pl``, a DCGM or datacenter power policy) or application
clocks set by someone make every kernel slower without any error. A value nvidia-smi could
not report this time (an older driver, a failed call) is unknown: never a change to or from
"off" (the gpu probe's ``clocks_error`` says why, once, for the whole host).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from driftwatch.facts import fmt
from driftwatch.diff.change import Change, Severity
from driftwatch.facts.read import Facts

FieldRule = Callable[[str, str, Facts, Facts], "Change | None"]
BELOW_DEFAULT = 0.95  # a limit this far under the default is a cap someone set, not rounding


def _watts(value: Any) -> str:
    number = fmt.number(value)
    return f"{number:g} W" if number is not None else "?"


def _known(old: Any, new: Any) -> tuple[float, float] | None:
    o, n = fmt.number(old), fmt.number(new)
    return None if o is None or n is None or o == n else (o, n)


def power_limit_rule(uuid: str, label: str, old: Facts, new: Facts) -> Change | None:
    pair = _known(old.get("power_limit_w"), new.get("power_limit_w"))
    if pair is None:
        return None
    o, n = pair
    default, most = fmt.number(new.get("power_default_limit_w")), fmt.number(new.get("power_max_limit_w"))
    bounds = ", ".join(f"{what} {_watts(v)}" for what, v in (("default", default), ("max", most)) if v is not None)
    text = f"{label} power limit {_watts(o)} → {_watts(n)}" + (f" ({bounds})" if bounds else "")
    if n > o:
        return Change("gpu", uuid, o, n, Severity.low, text + ": a higher cap, more headroom under load")
    below = default is not None and n < default * BELOW_DEFAULT
    why = (": a lower cap (nvidia-smi -pl, or a DCGM/datacenter power policy): under load the GPU lowers its "
           "clocks to stay under it, so kernels, NCCL and decode run slower")
    return Change("gpu", uuid, o, n, Severity.high if below else Severity.medium, text + why, magnitude=(o - n) / o)


def enforced_limit_rule(uuid: str, label: str, old: Facts, new: Facts) -> Change | None:
    """The ceiling the power manager enforces, the least of every limiter: lower than the
    requested limit when a module, chassis or system budget caps the GPU."""
    pair = _known(old.get("power_enforced_limit_w"), new.get("power_enforced_limit_w"))
    requested = fmt.number(new.get("power_limit_w"))
    if pair is None or (old.get("power_limit_w") != new.get("power_limit_w") and pair[1] == requested):
        return None  # the requested limit moved and the enforced one with it: power_limit_rule says it
    o, n = pair
    text = f"{label} enforced power limit {_watts(o)} → {_watts(n)}"
    if n < o and requested is not None and n < requested:
        text += (f" while the requested limit is {_watts(requested)}: another limiter (a module, chassis or "
                 "system power budget) caps the GPU; under load it runs at lower clocks")
        return Change("gpu", uuid, o, n, Severity.high, text, magnitude=(o - n) / o)
    return Change("gpu", uuid, o, n, Severity.low if n > o else Severity.medium, text)


def _clock(field: str, what: str, severity: Severity, why: str) -> FieldRule:
    def rule(uuid: str, label: str, old: Facts, new: Facts) -> Change | None:
        pair = _known(old.get(field), new.get(field))
        if pair is None:
            return None
        o, n = pair
        return Change("gpu", uuid, int(o), int(n), severity, f"{label} {what} {o:g} → {n:g} MHz: {why}")

    rule.__name__ = f"rule_{field}"
    return rule


def _limit(field: str, what: str) -> FieldRule:
    """A limit the board defines (default, maximum): it moves with the VBIOS, driver or GPU."""
    def rule(uuid: str, label: str, old: Facts, new: Facts) -> Change | None:
        pair = _known(old.get(field), new.get(field))
        if pair is None:
            return None
        o, n = pair
        text = f"{label} {what} {_watts(o)} → {_watts(n)}: another VBIOS, driver or GPU"
        return Change("gpu", uuid, o, n, Severity.low, text)

    rule.__name__ = f"rule_{field}"
    return rule


POWER_RULES: list[FieldRule] = [
    power_limit_rule,
    enforced_limit_rule,
    _limit("power_default_limit_w", "default power limit"),
    _limit("power_max_limit_w", "maximum power limit"),
    _clock("app_clock_graphics_mhz", "application graphics clock", Severity.medium,
           "set with nvidia-smi -ac (or reset): kernels run at this clock"),
    _clock("app_clock_memory_mhz", "application memory clock", Severity.medium,
           "set with nvidia-smi -ac (or reset): memory-bound kernels run at this clock"),
    _clock("default_app_clock_graphics_mhz", "default application graphics clock", Severity.low,
           "another VBIOS or driver"),
    _clock("default_app_clock_memory_mhz", "default application memory clock", Severity.low,
           "another VBIOS or driver"),
    _clock("max_clock_sm_mhz", "maximum SM clock", Severity.low, "another VBIOS, driver or GPU"),
    _clock("max_clock_memory_mhz", "maximum memory clock", Severity.low, "another VBIOS, driver or GPU"),
]
POWER_FIELDS = frozenset({
    "power_limit_w", "power_enforced_limit_w", "power_default_limit_w", "power_max_limit_w",
    "app_clock_graphics_mhz", "app_clock_memory_mhz", "default_app_clock_graphics_mhz",
    "default_app_clock_memory_mhz", "max_clock_sm_mhz", "max_clock_memory_mhz",
})


def clocks_readable(old: Facts, new: Facts) -> list[Change]:
    """The power and clock call failing (or working again) is said once for the host."""
    changes = []
    for key, what in (("clocks_error", "power limits and clocks"), ("clock_reasons_error", "clock event reasons")):
        o, n = old.get(key), new.get(key)
        if o == n:
            continue
        state = f"could not be read: {fmt.value(n)}" if n else f"can be read again (was: {fmt.value(o)})"
        text = f"GPU {what} {state}: they are not compared this time"
        changes.append(Change("gpu", f"({what})", o, n, Severity.info, text))
    return changes
