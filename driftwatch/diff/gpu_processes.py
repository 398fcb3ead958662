"""Who holds GPU memory: new compute processes, and free memory that vanished.

Free memory moves with every allocation, so it only counts past a threshold, and a drop
that a visible process accounts for is reported once, as that process.
"""

from __future__ import annotations

from driftwatch.facts import fmt
from driftwatch.diff.change import Change, Severity
from driftwatch.diff.context import DiffContext
from driftwatch.facts.read import Facts, as_dict
from driftwatch.diff.generic import changed_keys
from driftwatch.facts.names import gpu_label


def held_mib(processes: Facts) -> dict[str, float]:
    """Memory held by visible compute processes, per GPU UUID."""
    held: dict[str, float] = {}
    for proc in processes.values():
        p = as_dict(proc)
        used = fmt.number(p.get("used_mib"))
        if used is not None and isinstance(p.get("gpu_uuid"), str):
            held[p["gpu_uuid"]] = held.get(p["gpu_uuid"], 0.0) + used
    return held


def free_memory_change(
    item: str, label: str, old: Facts, new: Facts, process_delta_mib: float | None, ctx: DiffContext
) -> Change | None:
    o, n = fmt.number(old.get("memory_free_mib")), fmt.number(new.get("memory_free_mib"))
    if o is None or n is None or o == n:
        return None
    threshold = ctx.options.free_memory_threshold_mib
    lost = o - n
    # Symmetric on purpose: swapping the snapshots negates both deltas.
    # None: the process list is unknown on a side, so nothing explains the change.
    explained = process_delta_mib is not None and abs(process_delta_mib - lost) <= threshold
    significant = abs(lost) > threshold and not explained
    if not significant and not ctx.volatile:
        return None
    if not significant:
        severity, text = Severity.info, f"{label} free memory {fmt.gib(o)} → {fmt.gib(n)}"
    elif lost > 0:
        severity = Severity.high
        why = (
            "that no visible process accounts for: another container or a leaked allocation?"
            if process_delta_mib is not None
            else "(the compute processes could not be listed)"
        )
        text = (
            f"{label} has {fmt.gib(lost)} less free memory ({fmt.gib(o)} → {fmt.gib(n)} free) {why}"
        )
    else:
        severity = Severity.low
        text = f"{label} has {fmt.gib(-lost)} more free memory ({fmt.gib(o)} → {fmt.gib(n)} free)"
    return Change("gpu", item, fmt.gib(o), fmt.gib(n), severity, text, magnitude=abs(lost) / 1024)


def diff_processes(old: Facts, new: Facts, ctx: DiffContext) -> list[Change]:
    old_procs, new_procs = as_dict(old.get("processes")), as_dict(new.get("processes"))
    old_gpus, new_gpus = as_dict(old.get("gpus")), as_dict(new.get("gpus"))
    changes = []
    for key in changed_keys(old_procs, new_procs):
        o, n = old_procs.get(key), new_procs.get(key)
        if not isinstance(o, dict):
            changes.append(_arrived(key, as_dict(n), new_gpus, ctx))
        elif not isinstance(n, dict):
            changes.append(_left(key, o, new_gpus, old_gpus))
        elif (change := _resized(key, o, n, new_gpus, ctx)) is not None:
            changes.append(change)
    return changes


def _who(proc: Facts) -> str:
    return f"pid {proc.get('pid')} ({proc.get('name') or 'unknown process'})"


def _gpu_of(proc: Facts, gpus: Facts) -> tuple[str, Facts]:
    uuid = str(proc.get("gpu_uuid"))
    gpu = as_dict(gpus.get(uuid))
    return gpu_label(gpu, uuid), gpu


def _arrived(key: str, proc: Facts, gpus: Facts, ctx: DiffContext) -> Change:
    label, gpu = _gpu_of(proc, gpus)
    used = fmt.number(proc.get("used_mib")) or 0.0
    free, total = fmt.number(gpu.get("memory_free_mib")), fmt.number(gpu.get("memory_total_mib"))
    left = (
        f", leaving {fmt.gib(free)} free" + (f" of {fmt.gib(total)}" if total else "")
        if free is not None
        else ""
    )
    text = f"{_who(proc)} now holds {fmt.gib(used)} on {label}{left}"
    severity = Severity.high if used >= ctx.options.free_memory_threshold_mib else Severity.low
    return Change("gpu-process", key, None, fmt.gib(used), severity, text, magnitude=used / 1024)


def _left(key: str, proc: Facts, new_gpus: Facts, old_gpus: Facts) -> Change:
    label, _ = _gpu_of(proc, old_gpus)
    used = fmt.number(proc.get("used_mib")) or 0.0
    free = fmt.number(as_dict(new_gpus.get(str(proc.get("gpu_uuid")))).get("memory_free_mib"))
    now = f"; {fmt.gib(free)} free now" if free is not None else ""
    text = f"{_who(proc)} no longer holds {fmt.gib(used)} on {label}{now}"
    return Change(
        "gpu-process", key, fmt.gib(used), None, Severity.low, text, magnitude=used / 1024
    )


def _resized(key: str, old: Facts, new: Facts, gpus: Facts, ctx: DiffContext) -> Change | None:
    label, _ = _gpu_of(new, gpus)
    o, n = fmt.number(old.get("used_mib")) or 0.0, fmt.number(new.get("used_mib")) or 0.0
    if old.get("name") != new.get("name"):  # the pid was reused by another program
        text = f"pid {new.get('pid')} on {label} is now {new.get('name')} (was {old.get('name')})"
        return Change("gpu-process", key, old.get("name"), new.get("name"), Severity.low, text)
    if abs(n - o) <= ctx.options.free_memory_threshold_mib and not ctx.volatile:
        return None
    severity = (
        Severity.medium if abs(n - o) > ctx.options.free_memory_threshold_mib else Severity.info
    )
    text = f"{_who(new)} on {label} now holds {fmt.gib(n)} (was {fmt.gib(o)})"
    return Change(
        "gpu-process", key, fmt.gib(o), fmt.gib(n), severity, text, magnitude=abs(n - o) / 1024
    )
