"""GPUs across hosts: matched by position (index, else bus id), never by UUID.

Every host's GPU 0 has a different UUID and serial; what should match is the model, the
memory, the link and the modes at each position, and whether something holds memory.
"""

from __future__ import annotations

import posixpath
from typing import Any

from driftwatch.facts import fmt
from driftwatch.diff.change import Severity
from driftwatch.facts.read import as_dict
from driftwatch.diff.gpu_fields import MEMORY_READINGS
from driftwatch.fleet.facts import IDENTITY_KEYS, Fact, FactMap, HostView, freeze

# field → (severity, words); the diff's judgement of the same fields.
FIELDS: dict[str, tuple[Severity, str]] = {
    "memory_total_mib": (Severity.high, "total memory (MiB)"),
    "pcie_width": (Severity.high, "PCIe link width"),
    "pcie_width_max": (Severity.low, "max PCIe link width"),
    # Many GPUs drop the link generation when idle: a lead, not a verdict.
    "pcie_gen": (Severity.low, "PCIe generation"),
    "mig_mode": (Severity.high, "MIG mode"),
    "ecc_mode": (Severity.high, "ECC mode"),
    "ecc_uncorrected_volatile": (Severity.high, "uncorrected ECC errors"),
    "ecc_corrected_volatile": (Severity.low, "corrected ECC errors"),
    "retired_pages_pending": (Severity.high, "page retirement pending"),
    "remapped_rows_pending": (Severity.high, "row remapping pending"),
    "remapped_rows_failure": (Severity.critical, "row remapping failed"),
    "memory_reserved_mib": (Severity.medium, "reserved memory (MiB)"),
    "persistence_mode": (Severity.medium, "persistence mode"),
    "power_limit_w": (Severity.medium, "power limit (W)"),
}
# Used and free memory move with every allocation; who holds memory is compared instead.
SKIP = MEMORY_READINGS | IDENTITY_KEYS | {"index", "name", "volatile"}
KEYS = frozenset({"driver_version", "cuda_version", "gpus", "processes", "topology"})


def gpu_facts(facts: dict[str, Any], view: HostView) -> tuple[FactMap, frozenset[str]]:
    out: FactMap = {
        "gpu.driver_version": Fact("gpu", "driver", "driver", "NVIDIA driver",
                                   freeze(facts.get("driver_version")), Severity.critical),
        "gpu.cuda_version": Fact("gpu", "driver", "driver CUDA version", "the driver's CUDA version",
                                 freeze(facts.get("cuda_version")), Severity.critical),
    }
    gpus = ordered(as_dict(facts.get("gpus")))
    out["gpu.count"] = Fact("gpu", "gpu", "GPU count", "GPU count", len(gpus), Severity.high)
    processes = facts.get("processes")
    for position, (uuid, gpu) in enumerate(gpus):
        index = gpu.get("index")
        label = f"GPU {index}" if index is not None else f"GPU #{position}"
        base = f"gpu[{position}]"
        out[base] = Fact("gpu", "gpu", label, f"{label} model", freeze(gpu.get("name")), Severity.high)
        for key, value in gpu.items():
            if key not in SKIP:
                severity, words = FIELDS.get(key, (Severity.low, key))
                out[f"{base}.{key}"] = Fact("gpu", "gpu", label, f"{label} {words}", freeze(value),
                                            severity, within=base)
        # null: nvidia-smi could not list them; unknown is not "none".
        if processes is not None:
            out[f"{base}.processes"] = _holders(base, label, uuid, as_dict(processes), view)
    if "topology" in facts:
        out["gpu.topology"] = Fact("gpu", "gpu", "topology", "GPU topology (nvidia-smi topo -m)",
                                   freeze(facts.get("topology")), Severity.medium)
    return out, KEYS


def ordered(gpus: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """By index, then bus id: the order CUDA enumerates them in, identical across hosts."""
    items = [(str(uuid), as_dict(g)) for uuid, g in gpus.items()]

    def key(item: tuple[str, dict[str, Any]]) -> tuple[bool, float, str]:
        index = fmt.number(item[1].get("index"))
        return index is None, index if index is not None else 0.0, str(item[1].get("bus_id") or "")

    return sorted(items, key=key)


def _holders(base: str, label: str, uuid: str, processes: dict[str, Any], view: HostView) -> Fact:
    """Compute processes on one GPU as a count and names: pids differ, programs should not."""
    mine = [as_dict(p) for p in processes.values() if as_dict(p).get("gpu_uuid") == uuid]
    names = sorted(posixpath.basename(str(p.get("name") or "?")) for p in mine)
    held = sum(fmt.number(p.get("used_mib")) or 0.0 for p in mine)
    value = f"{fmt.plural(len(mine), 'compute process')} ({', '.join(names)})" if mine else "no compute process"
    # Memory held while the others' GPUs are empty is the classic "not enough memory".
    severity = Severity.high if held >= view.memory_threshold_mib else Severity.low
    note = f"holding {fmt.gib(held)}" if mine else ""
    return Fact("gpu", "gpu-process", label, f"{label} runs", value, severity,
                within=base, note=note)
