"""compare_snapshots: the pure comparison. Probe health first, then each probe's facts through
its area's rules. Nothing here judges or ranks: ``explain/`` joins these changes with the
rulebook's findings and orders them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from driftwatch.diff import (
    caches, canary, containers, cuda, driver, engine_settings, files, git, gpu, libraries, models, modules, nccl_conf,
    packages, perf, runtime, system,
)
from driftwatch.diff.change import Change, DiffOptions
from driftwatch.diff.commits import fold_commits
from driftwatch.diff.context import DiffContext
from driftwatch.facts.read import Facts
from driftwatch.diff.generic import diff_generic
from driftwatch.diff.launch import diff_launch
from driftwatch.diff.probes import comparable, diff_probe
from driftwatch.model import ProbeStatus, Snapshot

Rule = Callable[[Facts, Facts, DiffContext], list[Change]]

# Probe name → (its rules, the top-level fact keys those rules read). Keys a rule does
# not read still go through the generic walk, so a field a probe grows is never lost.
AREA_RULES: dict[str, tuple[Rule, frozenset[str]]] = {
    "system": (system.diff_system, system.KEYS),
    "gpu": (gpu.diff_gpu, gpu.KEYS),
    "driver": (driver.diff_driver, driver.KEYS),
    "modules": (modules.diff_modules, modules.KEYS),
    "cuda": (cuda.diff_cuda, cuda.KEYS),
    "python": (packages.diff_python, packages.KEYS),
    "git": (git.diff_git, git.KEYS),
    "files": (files.diff_files, files.KEYS),
    "processes": (runtime.diff_processes, runtime.PROCESS_KEYS),
    "logs": (runtime.diff_logs, runtime.LOG_KEYS),
    "caches": (caches.diff_caches, caches.KEYS),
    "nccl_conf": (nccl_conf.diff_nccl_conf, nccl_conf.KEYS),
    "models": (models.diff_models, models.KEYS),
    "libraries": (libraries.diff_libraries, libraries.KEYS),
    "containers": (containers.diff_containers, containers.KEYS),
    "perf": (perf.diff_perf, perf.KEYS),
    "engine": (engine_settings.diff_engine, engine_settings.KEYS),
    "canary": (canary.diff_canary, canary.KEYS),
}


def compare_snapshots(old: Snapshot, new: Snapshot, ctx: DiffContext) -> list[Change]:
    """Every change between two snapshots, unranked and unjudged: probe health first, then
    each probe's facts through its area's rules."""
    changes: list[Change] = []
    for name in _probe_order(old, new):
        old_record, new_record = old.probes.get(name), new.probes.get(name)
        health = diff_probe(name, old_record, new_record)
        changes += [health] if health is not None else []
        # A probe that failed on either side has no comparable facts: comparing them
        # would report a hung nvidia-smi as "every GPU removed".
        if old_record is None or new_record is None or not comparable(old_record, new_record):
            continue
        if old_record.facts != new_record.facts:
            changes += diff_facts(name, old_record.facts, new_record.facts, ctx)
    # Launch settings span two probes: the server's argv and the effective args it logged.
    changes += diff_launch(old, new)
    # A package reinstalled under a compile cache that did not change with it.
    changes += caches.stale_entries(ctx)
    # A moved commit is one finding that names the editable installs and files it moved.
    return fold_commits(changes, old, new)


def context_for(old: Snapshot, new: Snapshot, options: DiffOptions | None = None) -> DiffContext:
    return DiffContext.from_options(options or DiffOptions(), different_hosts=different_hosts(old, new), snapshots=(old, new))


def diff_facts(probe: str, old: Facts, new: Facts, ctx: DiffContext) -> list[Change]:
    rule, keys = AREA_RULES.get(probe, (None, frozenset()))
    if rule is None:
        return diff_generic(probe, old, new, ctx)
    try:
        changes = rule(old, new, ctx)
    except (TypeError, AttributeError, KeyError, ValueError):
        # Facts of an unexpected shape (a foreign or older probe): a plain key-by-key
        # comparison still says what changed, where a crash would say nothing.
        return diff_generic(probe, old, new, ctx)
    return changes + diff_generic(probe, old, new, ctx, skip=keys)


def different_hosts(old: Snapshot, new: Snapshot) -> bool:
    """Two machines when their machine ids or their hostnames differ (a cloned image keeps
    its machine id: the hostname tells the clones apart), else by the name used."""
    known = False
    for key in ("machine_id", "hostname"):
        a, b = _system_fact(old, key), _system_fact(new, key)
        if a and b:
            known = True
            if a != b:
                return True
    if known:
        return False
    # Like with like: a hostname read on one side only (the other's system probe failed)
    # against the other's name used would make one host two.
    if old.host.hostname and new.host.hostname:
        return old.host.hostname != new.host.hostname
    return old.host.name != new.host.name


def cloned_image(old: Snapshot, new: Snapshot) -> bool:
    """One machine id under two hostnames: a cloned image, or a renamed host."""
    a, b = _system_fact(old, "machine_id"), _system_fact(new, "machine_id")
    ha, hb = _system_fact(old, "hostname"), _system_fact(new, "hostname")
    return bool(a and a == b and ha and hb and ha != hb)


def _system_fact(snapshot: Snapshot, key: str) -> Any:
    record = snapshot.probes.get("system")
    if record is None or record.status != ProbeStatus.ok:
        return snapshot.host.hostname if key == "hostname" else None
    return record.facts.get(key) or (snapshot.host.hostname if key == "hostname" else None)


def _probe_order(old: Snapshot, new: Snapshot) -> list[str]:
    known = [name for name in AREA_RULES if name in old.probes or name in new.probes]
    rest = sorted((old.probes.keys() | new.probes.keys()) - AREA_RULES.keys())
    return known + rest
