"""Look-alike hosts for the fleet tests: the diff's baseline with per-host identities."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from driftwatch.diff import DiffOptions
from driftwatch.fleet import FleetResult, compare_fleet
from driftwatch.model import Snapshot
from tests.diff.builders import baseline, dists, make_snapshot

Facts = dict[str, dict[str, Any]]
Edit = Callable[[Facts], object]


def host_facts(n: int) -> Facts:
    """The baseline as host n: its own hostname, boot id, machine id and GPU UUIDs."""
    facts = baseline()
    system = facts["system"]
    system.update(hostname=f"gpu{n:02d}", boot_id=f"boot-{n}", machine_id=f"machine-{n}")
    system["volatile"]["uptime_s"] = 1000.0 * n
    gpus = facts["gpu"]["gpus"]
    facts["gpu"]["gpus"] = {f"{uuid[:-2]}{n:02d}": gpu for uuid, gpu in gpus.items()}
    return facts


def fleet(count: int, edits: dict[int, Edit] | None = None, **options: Any) -> FleetResult:
    snapshots: dict[str, Snapshot] = {}
    for n in range(1, count + 1):
        facts = host_facts(n)
        if edits and n in edits:
            edits[n](facts)
        snapshots[f"gpu{n:02d}"] = make_snapshot(host=f"gpu{n:02d}", minutes=n, **facts)
    return compare_fleet(snapshots, DiffOptions(**options))


def old_nccl(facts: Facts) -> None:
    dists(facts)["nvidia-nccl-cu12"].update(version="2.21.5", record_sha256="rec-old-nccl")
    facts["cuda"]["nccl"]["distributions"]["nvidia-nccl-cu12"] = "2.21.5"


def kernel(version: str) -> Edit:
    return lambda facts: facts["system"].update(kernel=version)


def gpu(facts: Facts, index: int) -> dict[str, Any]:
    return next(g for g in facts["gpu"]["gpus"].values() if g["index"] == index)
