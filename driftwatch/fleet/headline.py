"""The headline facts of a fleet, one small dict per host: what a matrix of hosts shows
first (driver, CUDA, torch, NCCL, SGLang and its kernels, GPUs, memory fraction).

``headline_facts`` reads one snapshot and keeps a dozen short strings, so a caller that
reads a thousand hosts one at a time keeps them without keeping the snapshots. Each
column also names the fleet fact paths (``flatten``) it stands for, so a finding on any
of them marks that column's cell of the hosts it names. Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from driftwatch.facts.read import as_dict, ok_facts
from driftwatch.facts.launch import FRACTIONS, launch_settings
from driftwatch.fleet.gpus import ordered
from driftwatch.model import Snapshot

Reader = Callable[[Snapshot], str]


@dataclass(frozen=True)
class Column:
    key: str
    title: str
    facts: re.Pattern[str]  # the fleet fact paths this column stands for (fullmatch)
    read: Reader


def _joined(values: Iterable[Any]) -> str:
    """Distinct values in first-seen order: one interpreter's torch, or two of them."""
    return ", ".join(dict.fromkeys(str(v) for v in values if v is not None))


def _distributions(snapshot: Snapshot) -> list[dict[str, Any]]:
    interpreters = as_dict(ok_facts(snapshot, "python").get("interpreters")).values()
    return [as_dict(as_dict(entry).get("distributions")) for entry in interpreters]


def _dist(*names: str) -> Reader:
    def read(snapshot: Snapshot) -> str:
        return _joined(
            as_dict(dists.get(name)).get("version") for dists in _distributions(snapshot) for name in names
        )

    return read


def _driver(snapshot: Snapshot) -> str:
    return _joined([ok_facts(snapshot, "gpu").get("driver_version")])


def _driver_cuda(snapshot: Snapshot) -> str:
    return _joined([ok_facts(snapshot, "gpu").get("cuda_version")])


def _toolkit(snapshot: Snapshot) -> str:
    return _joined([as_dict(ok_facts(snapshot, "cuda").get("toolkit")).get("nvcc")])


def _torch(snapshot: Snapshot) -> str:
    found = _dist("torch")(snapshot)
    builds = as_dict(ok_facts(snapshot, "cuda").get("torch")).values()
    return found or _joined(as_dict(build).get("version") for build in builds)


def _nccl(snapshot: Snapshot) -> str:
    wheels = [
        as_dict(dist).get("version")
        for dists in _distributions(snapshot) for name, dist in dists.items() if name.startswith("nvidia-nccl-cu")
    ]
    nccl = as_dict(ok_facts(snapshot, "cuda").get("nccl"))
    return _joined(wheels) or _joined(as_dict(nccl.get("distributions")).values()) or _joined(
        sorted(map(str, filter(None, as_dict(nccl.get("system")).values())))
    )


def _gpu_models(snapshot: Snapshot) -> str:
    return _joined(gpu.get("name") for _, gpu in ordered(as_dict(ok_facts(snapshot, "gpu").get("gpus"))))


def _gpu_count(snapshot: Snapshot) -> str:
    gpu = ok_facts(snapshot, "gpu")
    return str(len(as_dict(gpu.get("gpus")))) if gpu else ""  # a failed nvidia-smi is not "0 GPUs"


def _memory_fraction(snapshot: Snapshot) -> str:
    settings = launch_settings(snapshot)
    # As fleet/runtime.py compares it: "0.55" on argv equals 0.55 in the log.
    return _joined(str(settings[key][0]).lower() for key in FRACTIONS if key in settings)


def _dist_paths(pattern: str) -> str:
    return rf"python\[.*\]\.dist\[(?:{pattern})\](?:\..*)?"


COLUMNS: tuple[Column, ...] = (
    Column("driver", "driver", re.compile(r"gpu\.driver_version|system\.nvidia_modules\[.*\]"), _driver),
    Column("cuda", "CUDA (driver)", re.compile(r"gpu\.cuda_version"), _driver_cuda),
    Column("nvcc", "CUDA toolkit", re.compile(r"cuda\.toolkit\..*"), _toolkit),
    Column("torch", "torch", re.compile(_dist_paths("torch") + r"|cuda\.torch\[.*\](?:\..*)?"), _torch),
    Column("nccl", "NCCL", re.compile(_dist_paths(r"nvidia-nccl-cu\d+") + r"|cuda\.nccl\[.*\]|cuda\.nccl\.system"), _nccl),
    Column("sglang", "sglang", re.compile(_dist_paths("sglang")), _dist("sglang")),
    Column("sgl-kernel", "sgl-kernel", re.compile(_dist_paths("sgl-kernel|sglang-kernel")), _dist("sgl-kernel", "sglang-kernel")),
    Column("flashinfer", "flashinfer", re.compile(_dist_paths("flashinfer-python|flashinfer")), _dist("flashinfer-python", "flashinfer")),
    Column("gpu-model", "GPU model", re.compile(r"gpu\[\d+\]"), _gpu_models),
    Column("gpu-count", "GPUs", re.compile(r"gpu\.count"), _gpu_count),
    Column("mem-fraction", "memory fraction", re.compile(rf"launch\[(?:{'|'.join(FRACTIONS)})\]"), _memory_fraction),
)  # fmt: skip


def headline_facts(snapshot: Snapshot) -> dict[str, str]:
    """Column key → this host's value ("" when the host has none or its probe failed)."""
    return {column.key: column.read(snapshot) for column in COLUMNS}


def column_of(fact: str) -> Column | None:
    """The headline column a fleet fact path belongs to, if any."""
    return next((column for column in COLUMNS if column.facts.fullmatch(fact)), None)
