"""The GPUs and their driver (the ``gpu`` probe).

GPUs are matched by UUID, so a GPU that fell off the bus is "missing", not "GPU 3 is a
different card"; between two different hosts they are matched by index instead.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from driftwatch.diff.change import Change, Severity
from driftwatch.diff.context import DiffContext
from driftwatch.facts.read import Facts, as_dict
from driftwatch.diff.generic import leaf_changes, walk
from driftwatch.diff.gpu_fields import FIELD_RULES, HANDLED_FIELDS, MEMORY_READINGS
from driftwatch.diff.gpu_power import clocks_readable
from driftwatch.diff.gpu_processes import (
    diff_processes,
    free_memory_change,
    held_mib,
)
from driftwatch.facts.names import gpu_label

KEYS = frozenset({"driver_version", "cuda_version", "gpus", "processes", "topology", "clocks_error",
                  "clock_reasons_error"})


def diff_gpu(old: Facts, new: Facts, ctx: DiffContext) -> list[Change]:
    changes = _driver(old, new)
    old_gpus, new_gpus = as_dict(old.get("gpus")), as_dict(new.get("gpus"))
    old_held, new_held = (
        held_mib(as_dict(old.get("processes"))),
        held_mib(as_dict(new.get("processes"))),
    )
    old_keyed, new_keyed = _match(old_gpus, ctx), _match(new_gpus, ctx)
    for key in sorted(old_keyed.keys() | new_keyed.keys()):
        (old_uuid, o), (new_uuid, n) = (
            old_keyed.get(key, (None, None)),
            new_keyed.get(key, (None, None)),
        )
        if o is None or n is None:
            changes.append(_presence(old_uuid, o, new_uuid, n))
        elif o != n:
            delta: float | None = None  # unknown when a side could not list processes
            if old.get("processes") is not None and new.get("processes") is not None:
                delta = new_held.get(str(new_uuid), 0.0) - old_held.get(str(old_uuid), 0.0)
            changes += _one_gpu(str(new_uuid), o, n, delta, ctx)
    changes += _processes(old, new, ctx)
    changes += clocks_readable(old, new)
    changes = _labelled(changes, old_gpus, new_gpus)
    # null: `topo -m` failed this time (unknown), not "no topology".
    known = old.get("topology") is not None and new.get("topology") is not None
    if known and old.get("topology") != new.get("topology"):
        text = "GPU topology (nvidia-smi topo -m) changed: NVLink/PCIe paths or CPU affinity differ"
        changes.append(
            Change(
                "gpu", "topology", old.get("topology"), new.get("topology"), Severity.medium, text
            )
        )
    return changes


def _labelled(changes: list[Change], old_gpus: Facts, new_gpus: Facts) -> list[Change]:
    """Name GPUs (and their processes, keyed ``UUID:pid``) as people do, for the reports."""
    gpus = {**old_gpus, **new_gpus}
    labelled = []
    for change in changes:
        uuid, _, pid = str(change.item).partition(":")
        if uuid in gpus and not change.label:
            label = gpu_label(as_dict(gpus[uuid]), uuid) + (f", pid {pid}" if pid else "")
            change = replace(change, label=label)
        labelled.append(change)
    return labelled


def _processes(old: Facts, new: Facts, ctx: DiffContext) -> list[Change]:
    # null processes means nvidia-smi could not list them: unknown, not "all exited".
    known_old, known_new = old.get("processes") is not None, new.get("processes") is not None
    if known_old and known_new:
        return diff_processes(old, new, ctx)
    if known_old == known_new:
        return []
    state = "can be listed again" if known_new else "could not be listed"
    text = f"GPU compute processes {state}: processes are not compared this time"
    return [Change("gpu-process", "(process list)", known_old, known_new, Severity.info, text)]


def _driver(old: Facts, new: Facts) -> list[Change]:
    od, nd = old.get("driver_version"), new.get("driver_version")
    oc, nc = old.get("cuda_version"), new.get("cuda_version")
    if od != nd:
        cuda = f", supports CUDA {oc} → {nc}" if oc != nc and oc is not None and nc is not None else ""
        text = (
            f"NVIDIA driver {od} → {nd}{cuda}: every CUDA process now runs on a different "
            "driver (upgraded, or a reboot picked up a new one)"
        )
        return [Change("driver", "driver", od, nd, Severity.critical, text, magnitude=3.0)]
    if oc != nc and oc is not None and nc is not None:  # null: not read this time
        text = (
            f"the driver's supported CUDA version {oc} → {nc} with the same driver {nd}: "
            "a forward-compat package changed?"
        )
        return [
            Change("driver", "driver CUDA version", oc, nc, Severity.critical, text, magnitude=2.0)
        ]
    return []


def _match(gpus: Facts, ctx: DiffContext) -> dict[str, tuple[str, Facts]]:
    matched: dict[str, tuple[str, Facts]] = {}
    for uuid, gpu in gpus.items():
        g = as_dict(gpu)
        index = g.get("index")
        key = f"index {index}" if ctx.different_hosts and index is not None else uuid
        matched[key] = (uuid, g)
    return matched


def _presence(
    old_uuid: str | None, old: Facts | None, new_uuid: str | None, new: Facts | None
) -> Change:
    if old is None:
        gpu, uuid = as_dict(new), str(new_uuid)
        text = f"{gpu_label(gpu, uuid)} {uuid} (bus {gpu.get('bus_id')}) appeared"
        return Change("gpu", uuid, None, gpu.get("name"), Severity.medium, text)
    gpu, uuid = old, str(old_uuid)
    text = (
        f"{gpu_label(gpu, uuid)} {uuid} (bus {gpu.get('bus_id')}) is missing: fallen off the bus "
        "(Xid 79?), hidden by CUDA_VISIBLE_DEVICES, or the host's GPUs were swapped"
    )
    return Change("gpu", uuid, gpu.get("name"), None, Severity.critical, text, magnitude=2.0)


def _one_gpu(
    uuid: str, old: Facts, new: Facts, process_delta: float | None, ctx: DiffContext
) -> list[Change]:
    label = gpu_label(new, uuid)
    changes = [c for rule in FIELD_RULES if (c := rule(uuid, label, old, new)) is not None]
    free = free_memory_change(uuid, label, old, new, process_delta, ctx)
    changes += [free] if free is not None else []
    rest_old = {k: v for k, v in old.items() if k not in HANDLED_FIELDS}
    rest_new = {k: v for k, v in new.items() if k not in HANDLED_FIELDS}
    changes += _items(uuid, leaf_changes("gpu", label, walk(rest_old, rest_new, (), ctx.volatile)))
    if ctx.volatile:  # used memory mirrors free memory: a reading, not drift
        readings = walk(
            _pick(old, MEMORY_READINGS - {"memory_free_mib"}),
            _pick(new, MEMORY_READINGS - {"memory_free_mib"}),
            (),
            True,
            True,
        )
        changes += _items(uuid, leaf_changes("gpu", label, readings))
    return changes


def _items(uuid: str, changes: list[Change]) -> list[Change]:
    # The walker names changes by field; for a GPU the item is the GPU's UUID.
    return [
        Change(c.category, uuid, c.old, c.new, c.severity, c.explanation, c.magnitude, c.focus)
        for c in changes
    ]


def _pick(facts: Facts, keys: frozenset[str]) -> dict[str, Any]:
    return {k: facts.get(k) for k in keys}
