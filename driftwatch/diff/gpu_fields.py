"""Per-GPU field rules: which settings and counters matter, and how much."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from driftwatch.facts import fmt
from driftwatch.diff.change import Change, Severity
from driftwatch.facts.read import Facts
from driftwatch.diff.gpu_power import POWER_FIELDS, POWER_RULES

FieldRule = Callable[[str, str, Facts, Facts], "Change | None"]

# Used and free memory move with every allocation; free memory is judged by threshold
# against the processes (gpu_processes), used memory is a mirror of it.
MEMORY_READINGS = frozenset({"memory_free_mib", "memory_used_mib"})


def _setting(field: str, what: str, severity: Severity, why: str) -> FieldRule:
    def rule(uuid: str, label: str, old: Facts, new: Facts) -> Change | None:
        o, n = old.get(field), new.get(field)
        if o == n:
            return None
        text = f"{label} {what} {fmt.value(o)} → {fmt.value(n)}: {why}"
        return Change("gpu", uuid, o, n, severity, text)

    rule.__name__ = f"rule_{field}"
    return rule


def _counter(field: str, what: str, rising: Severity, why: str) -> FieldRule:
    """A counter that should stay at zero; ``what`` names one count ("uncorrected ECC error")."""
    def rule(uuid: str, label: str, old: Facts, new: Facts) -> Change | None:
        o, n = fmt.number(old.get(field)), fmt.number(new.get(field))
        if o == n:
            return None
        if o is not None and n is not None and n > o:
            text = f"{label} has {fmt.plural(int(n - o), 'new ' + what)} ({int(o)} → {int(n)}): {why}"
            return Change(
                "gpu", uuid, old.get(field), new.get(field), rising, text, magnitude=n - o
            )
        text = f"{label} {what}s count {fmt.value(old.get(field))} → {fmt.value(new.get(field))}"
        if o is not None and n is not None:  # counters fall only when a driver reload resets them
            text += " (counters reset: driver reload or reboot)"
        return Change("gpu", uuid, old.get(field), new.get(field), Severity.info, text)

    rule.__name__ = f"rule_{field}"
    return rule


def _link(gpu: Facts) -> tuple[Any, Any]:
    return gpu.get("pcie_gen"), gpu.get("pcie_width")


def pcie_rule(uuid: str, label: str, old: Facts, new: Facts) -> Change | None:
    (og, ow), (ng, nw) = _link(old), _link(new)
    if (og, ow) == (ng, nw):
        return None
    o, n = f"Gen{og} x{ow}", f"Gen{ng} x{nw}"
    if _lower(ow, nw):
        text = (
            f"{label} PCIe link {o} → {n}: the link trained down to fewer lanes; host-device "
            "copies and P2P are slower (reseat or check the riser)"
        )
        return Change("gpu", uuid, o, n, Severity.high, text, magnitude=1.0)
    if _lower(og, ng):
        # Many GPUs (GeForce, some L40S) drop the link generation at idle to save power,
        # so a lower generation alone is a lead, not a verdict.
        text = (
            f"{label} PCIe link {o} → {n}: slower link generation (GPUs may downshift when "
            "idle; re-check under load)"
        )
        return Change("gpu", uuid, o, n, Severity.medium, text, magnitude=0.5)
    return Change("gpu", uuid, o, n, Severity.low, f"{label} PCIe link {o} → {n}")


def _lower(old: Any, new: Any) -> bool:
    return isinstance(old, (int, float)) and isinstance(new, (int, float)) and new < old


FIELD_RULES: list[FieldRule] = [
    _counter(
        "ecc_uncorrected_volatile",
        "uncorrected ECC error",
        Severity.critical,
        "its memory is failing; drain this GPU and check for retired pages or row remapping",
    ),
    _counter(
        "ecc_corrected_volatile",
        "corrected ECC error",
        Severity.low,
        "memory errors the GPU fixed; a rising count can precede uncorrected ones",
    ),
    _setting("retired_pages_pending", "page retirement pending", Severity.high,
             "memory pages wait to be retired at the next GPU reset; until then they can still be used"),
    _setting("remapped_rows_pending", "row remapping pending", Severity.high,
             "a memory row waits to be remapped at the next GPU reset (drain and reset the GPU)"),
    _setting("remapped_rows_failure", "row remapping failed", Severity.critical,
             "the GPU ran out of spare rows: its memory can no longer be repaired"),
    pcie_rule,
    _setting(
        "memory_total_mib",
        "total memory (MiB)",
        Severity.high,
        "usable memory changed (ECC or MIG mode change?)",
    ),
    _setting(
        "memory_reserved_mib",
        "reserved memory (MiB)",
        Severity.medium,
        "the driver reserves a different amount",
    ),
    _setting("mig_mode", "MIG mode", Severity.high, "the GPU is partitioned differently"),
    _setting("ecc_mode", "ECC mode", Severity.high, "usable memory and error handling changed"),
    _setting(
        "persistence_mode",
        "persistence mode",
        Severity.medium,
        "without it the driver unloads between jobs, first CUDA calls slow down and settings reset",
    ),
    *POWER_RULES,
]

HANDLED_FIELDS = MEMORY_READINGS | frozenset(
    {
        "ecc_uncorrected_volatile",
        "ecc_corrected_volatile",
        "retired_pages_pending",
        "remapped_rows_pending",
        "remapped_rows_failure",
        "pcie_gen",
        "pcie_width",
        "memory_total_mib",
        "memory_reserved_mib",
        "mig_mode",
        "ecc_mode",
        "persistence_mode",
    }
) | POWER_FIELDS
