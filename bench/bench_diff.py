"""How fast is the diff on a big host? 800 distributions, 8 GPUs, 5,000 watched files.

Times ``diff_snapshots`` against what the CLI must pay anyway to read the two snapshots
(``json.loads``, and pydantic validation), in the same process. Run:

    python bench/bench_diff.py [--repeat N]

Prints absolute seconds (median of N runs) and the ratio diff / json-load for three pairs:
identical hosts, a typical drift (a few upgrades, edits, a new GPU process, volatile noise),
and a heavy drift (every distribution upgraded, every file edited).
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from driftwatch.explain import diff_snapshots  # noqa: E402
from driftwatch.model import HostIdentity, ProbeRecord, ProbeStatus, Snapshot  # noqa: E402
from tests.diff.builders import gpu_entry, python_facts  # noqa: E402  (the diff tests' H200 and venv)

N_DISTS, N_GPUS, N_FILES = 800, 8, 5000


def _dists() -> dict[str, Any]:
    names = ["sglang", "sgl-kernel", "torch", "flashinfer-python", "nvidia-nccl-cu12", "triton"]
    names += [f"package-{i:03d}" for i in range(N_DISTS - len(names))]
    dists = {}
    for i, name in enumerate(names):
        requires = [f"package-{(i * 7 + k) % (N_DISTS - 6):03d}>=1.{k}" for k in range(10)]
        if name == "sglang":
            requires += ["sgl-kernel==0.3.16.post4", "torch==2.8.0"]
        dists[name] = {
            "name": name,
            "version": f"1.{i % 40}.{i % 7}",
            "installed_at": 1.77e9 + i,
            "installer": "pip",
            "editable": False,
            "direct_url": None,
            "source_commit": None,
            "record_sha256": f"{i:064x}",
            "requires": requires,
            "location": "/root/ml-env/lib/python3.12/site-packages",
        }
    dists["sgl-kernel"]["version"] = "0.3.16.post4"
    return dists


def _gpus() -> dict[str, Any]:
    gpus = {}
    for i in range(N_GPUS):
        uuid = f"GPU-{i:08x}-0000-0000-0000-000000000000"
        gpus[uuid] = gpu_entry(i, uuid, f"00000000:{0x18 + i:02x}:00.0")
    return gpus


def base_facts() -> dict[str, Any]:
    files = {
        f"/root/sglang/python/sglang/srt/mod{i // 100}/file{i}.py": {
            "size": 1000 + i,
            "mtime": 1.77e9 + i,
            "mode": "0644",
            "sha256": f"{i:064x}",
            "error": None,
        }
        for i in range(N_FILES)
    }
    return {
        "python": python_facts(_dists()),
        "gpu": {
            "driver_version": "590.48.01",
            "cuda_version": "13.1",
            "gpus": _gpus(),
            "processes": {},
            "topology": "GPU0\tX\n" * 8,
        },
        "files": {
            "patterns": ["~/sglang/python/sglang/srt/**/*.py"],
            "files": files,
            "truncated": False,
        },
        "git": {
            "repos": {
                "~/sglang": {
                    "path": "/root/sglang",
                    "head": "9f1c" * 10,
                    "branch": "main",
                    "dirty": [],
                    "diff_sha256": None,
                    "error": None,
                }
            }
        },
        "system": {
            "hostname": "gpu01",
            "boot_id": "b1",
            "kernel": "5.15.0-171-generic",
            "volatile": {"uptime_s": 1.0},
        },
    }


def typical(facts: dict[str, Any]) -> None:
    dists = facts["python"]["interpreters"]["python3"]["distributions"]
    dists["sgl-kernel"]["version"] = "0.3.17"
    for i in range(0, N_DISTS - 6, 40):
        dists[f"package-{i:03d}"]["version"] = "9.9.9"
    for i in range(0, N_FILES, 100):
        facts["files"]["files"][f"/root/sglang/python/sglang/srt/mod{i // 100}/file{i}.py"][
            "mtime"
        ] += 60
    gpus = facts["gpu"]["gpus"]
    for gpu in gpus.values():
        gpu["volatile"]["temperature_c"] = 64
    uuid = next(iter(gpus))
    gpus[uuid]["memory_free_mib"] -= 22528
    facts["gpu"]["processes"][f"{uuid}:10291"] = {
        "gpu_uuid": uuid,
        "pid": 10291,
        "name": "memhog",
        "used_mib": 22528,
    }
    facts["system"]["volatile"]["uptime_s"] = 2.0


def heavy(facts: dict[str, Any]) -> None:
    for dist in facts["python"]["interpreters"]["python3"]["distributions"].values():
        dist["version"] += ".1"
    for entry in facts["files"]["files"].values():
        entry["sha256"], entry["mtime"] = "f" * 64, entry["mtime"] + 60


def snapshot_json(facts: dict[str, Any]) -> str:
    probes = {
        name: ProbeRecord(status=ProbeStatus.ok, facts=value) for name, value in facts.items()
    }
    snap = Snapshot(
        host=HostIdentity(name="gpu01", address="gpu01"),
        duration_s=1.0,
        taken_at=datetime(2026, 2, 19, tzinfo=timezone.utc),
        probes=probes,
    )
    return snap.model_dump_json()


def median_time(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def bench(label: str, edit: Callable[[dict[str, Any]], None] | None, repeat: int) -> None:
    facts = base_facts()
    new_facts = copy.deepcopy(facts)
    if edit is not None:
        edit(new_facts)
    old_text, new_text = snapshot_json(facts), snapshot_json(new_facts)
    old, new = Snapshot.model_validate_json(old_text), Snapshot.model_validate_json(new_text)
    load = median_time(lambda: (json.loads(old_text), json.loads(new_text)), repeat)
    validate = median_time(
        lambda: (Snapshot.model_validate_json(old_text), Snapshot.model_validate_json(new_text)),
        repeat,
    )
    diff = median_time(lambda: diff_snapshots(old, new), repeat)
    changes = len(diff_snapshots(old, new).changes)
    print(
        f"{label:9} {changes:6d} changes  diff {diff:.4f} s  json.loads {load:.4f} s  "
        f"validate {validate:.4f} s  diff/json.loads {diff / load:5.2f}x  "
        f"diff/validate {diff / validate:5.2f}x"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    print(
        f"{N_DISTS} distributions, {N_GPUS} GPUs, {N_FILES} files; "
        f"median of {args.repeat} runs (two snapshots)"
    )
    for label, edit in (("identical", None), ("typical", typical), ("heavy", heavy)):
        bench(label, edit, args.repeat)


if __name__ == "__main__":
    main()
