"""A realistic baseline GPU host as snapshot facts, built in code for the diff tests.

``make_snapshot()`` is the baseline; ``make_snapshot(gpu=facts)`` replaces one probe's
facts, and a ``ProbeRecord`` value replaces the whole record (to make a probe fail).
Tests take ``baseline()`` (a deep copy), edit it, and pass it back in.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

from driftwatch.diff import DiffOptions

from driftwatch.explain import DiffResult, diff_snapshots
from driftwatch.model import HostIdentity, ProbeRecord, ProbeStatus, Snapshot

T0 = datetime(2026, 2, 19, 10, 0, 0, tzinfo=timezone.utc)
INSTALLED = 1771495200.0  # 2026-02-19 10:00 UTC
GPU0 = "GPU-3f2a9c41-8d5e-4b7a-9c1e-0a1b2c3d4e5f"
GPU1 = "GPU-7b6c5d4e-3f2a-4b1c-8d9e-f0e1d2c3b4a5"
HEAD = "9f1c2ab3d4e5f60718293a4b5c6d7e8f90a1b2c3"
SRT = "/root/sglang/python/sglang/srt"


def dist(
    name: str, version: str, *requires: str, record: str | None = None, **extra: Any
) -> dict[str, Any]:
    return {
        "name": name,
        "version": version,
        "installed_at": INSTALLED,
        "installer": "pip",
        "editable": False,
        "direct_url": None,
        "source_commit": None,
        "record_sha256": record or f"rec-{name}-{version}",
        "requires": list(requires),
        "location": "/root/ml-env/lib/python3.12/site-packages",
        **extra,
    }


def _python() -> dict[str, Any]:
    dists = [
        dist(
            "sglang",
            "0.5.6",
            "sgl-kernel==0.3.16.post4",
            "torch==2.8.0",
            "flashinfer-python==0.4.1",
            "transformers>=4.57",
            'pytest; extra == "test"',
        ),
        dist("sgl-kernel", "0.3.16.post4", "torch"),
        dist("torch", "2.8.0+cu128", 'nvidia-nccl-cu12==2.27.3; platform_system == "Linux"'),
        dist("flashinfer-python", "0.4.1", "torch", "numpy"),
        dist("nvidia-nccl-cu12", "2.27.3"),
        dist("transformers", "4.57.1", "numpy>=1.17", "requests"),
        dist("numpy", "2.1.3"),
        dist("requests", "2.32.3"),
    ]
    return python_facts({d["name"]: d for d in dists})


def python_facts(distributions: dict[str, Any]) -> dict[str, Any]:
    """The python probe's facts for one interpreter (/root/ml-env) holding ``distributions``."""
    return {
        "interpreters": {
            "python3": {
                "executable": "/root/ml-env/bin/python3",
                "version": "3.12.3",
                "prefix": "/root/ml-env",
                "error": None,
                "distributions": distributions,
            }
        }
    }


def gpu_entry(index: int, uuid: str, bus: str) -> dict[str, Any]:
    return {
        "index": index,
        "name": "NVIDIA H200",
        "bus_id": bus,
        "memory_total_mib": 143771,
        "memory_reserved_mib": 0,
        "memory_used_mib": 1,
        "memory_free_mib": 143770,
        "persistence_mode": "Enabled",
        "mig_mode": "Disabled",
        "ecc_mode": "Enabled",
        "ecc_uncorrected_volatile": 0,
        "ecc_corrected_volatile": 0,
        "pcie_gen": 5,
        "pcie_width": 16,
        "pcie_gen_max": 5,
        "pcie_width_max": 16,
        "compute_cap": "9.0",
        "power_limit_w": 700.0,
        "volatile": {
            "temperature_c": 31,
            "power_draw_w": 75.3,
            "sm_clock_mhz": 345,
            "utilization_gpu_pct": 0,
            "utilization_memory_pct": 0,
        },
    }


def _gpu() -> dict[str, Any]:
    return {
        "driver_version": "590.48.01",
        "cuda_version": "13.1",
        "gpus": {
            GPU0: gpu_entry(0, GPU0, "00000000:83:00.0"),
            GPU1: gpu_entry(1, GPU1, "00000000:84:00.0"),
        },
        "processes": {},
        "topology": "\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV18\t0-47\nGPU1\tNV18\t X \t0-47",
    }


def _files() -> dict[str, Any]:
    names = ["server_args.py", "managers/scheduler.py", "mem_cache/memory_pool.py"]
    return {
        "patterns": ["~/sglang/python/sglang/srt/**/*.py"],
        "files": {
            f"{SRT}/{n}": {
                "size": 1000 + i,
                "mtime": INSTALLED - 3600 * i,
                "mode": "0644",
                "sha256": f"{i:02d}" * 32,
                "error": None,
            }
            for i, n in enumerate(names)
        },
        "truncated": False,
    }


BASELINE: dict[str, dict[str, Any]] = {
    "system": {
        "hostname": "gpu01",
        "kernel": "5.15.0-171-generic",
        "os_release": "Ubuntu 22.04.5 LTS",
        "boot_id": "b0a1c2d3-boot",
        "machine_id": "m-gpu01",
        "memlock": "unlimited",
        "shm_bytes": 68719476736,
        "nvidia_modules": {"nvidia": "590.48.01", "nvidia_uvm": None},
        "volatile": {"uptime_s": 12345.6},
    },
    "gpu": _gpu(),
    "cuda": {
        "nccl": {
            "distributions": {"nvidia-nccl-cu12": "2.27.3"},
            "system": {"/usr/lib/x86_64-linux-gnu/libnccl.so.2.21.5": "2.21.5"},
        },
        "torch": {
            "python3": {
                "version": "2.8.0+cu128",
                "cuda": "12.8",
                "git_version": "a1b2c3d4e5f6",
                "path": "/root/ml-env/lib/python3.12/site-packages/torch/version.py",
            }
        },
        "toolkit": {"nvcc": "12.8.93", "cuda_link": "/usr/local/cuda-12.8"},
        "cudnn": {"nvidia-cudnn-cu12": "9.10.2.21"},
    },
    "python": _python(),
    "git": {
        "repos": {
            "~/sglang": {
                "path": "/root/sglang",
                "head": HEAD,
                "branch": "main",
                "describe": "v0.5.6-12-g9f1c2ab",
                "subject": "Fix radix cache eviction",
                "date": "2026-02-19T10:00:00+00:00",
                "dirty": [],
                "diff_sha256": None,
                "error": None,
            }
        }
    },
    "files": _files(),
}


def baseline() -> dict[str, Any]:
    return copy.deepcopy(BASELINE)


def failed(status: ProbeStatus, error: str) -> ProbeRecord:
    return ProbeRecord(status=status, duration_s=10.0, error=error)


def make_snapshot(*, host: str = "gpu01", minutes: int = 0, **probe_facts: Any) -> Snapshot:
    probes: dict[str, ProbeRecord] = {}
    for name, facts in {**baseline(), **probe_facts}.items():
        probes[name] = (
            facts
            if isinstance(facts, ProbeRecord)
            else ProbeRecord(status=ProbeStatus.ok, duration_s=0.1, facts=facts)
        )
    return Snapshot(
        host=HostIdentity(name=host, address=f"root@{host}", hostname=host),
        taken_at=T0 + timedelta(minutes=minutes),
        duration_s=0.8,
        probes=probes,
    )


def dists(facts: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The baseline interpreter's distributions, to edit in place."""
    result: dict[str, Any] = facts["python"]["interpreters"]["python3"]["distributions"]
    return result


def diff_after(edit: Callable[[dict[str, dict[str, Any]]], object], **options: Any) -> DiffResult:
    """Diff the baseline against the baseline after ``edit`` mutated a copy of its facts."""
    facts = baseline()
    edit(facts)
    return diff_snapshots(
        make_snapshot(), make_snapshot(minutes=60, **facts), options=DiffOptions(**options)
    )
