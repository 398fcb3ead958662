"""diff_snapshots: probe health first, then each probe's facts through its area's rules."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from driftwatch.diff import caches, cuda, driver, files, git, gpu, libraries, models, nccl_conf, packages, runtime, system
from driftwatch.diff.change import Change, DiffOptions, DiffResult, Severity
from driftwatch.diff.commits import fold_commits
from driftwatch.diff.context import DiffContext, Facts
from driftwatch.diff.generic import diff_generic
from driftwatch.diff.known_bad import apply_findings, said_once
from driftwatch.diff.launch import diff_launch
from driftwatch.diff.probes import comparable, diff_probe
from driftwatch.diff.rank import rank_changes
from driftwatch.model import ProbeStatus, Snapshot
from driftwatch.rules.finding import Finding
from driftwatch.rules.host import RuleOptions
from driftwatch.rules.registry import diagnose

Rule = Callable[[Facts, Facts, DiffContext], list[Change]]

# Probe name → (its rules, the top-level fact keys those rules read). Keys a rule does
# not read still go through the generic walk, so a field a probe grows is never lost.
AREA_RULES: dict[str, tuple[Rule, frozenset[str]]] = {
    "system": (system.diff_system, system.KEYS),
    "gpu": (gpu.diff_gpu, gpu.KEYS),
    "driver": (driver.diff_driver, driver.KEYS),
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
}


def diff_snapshots(
    old: Snapshot, new: Snapshot, *, options: DiffOptions | None = None
) -> DiffResult:
    different = different_hosts(old, new)
    ctx = DiffContext.from_options(options or DiffOptions(), different_hosts=different, snapshots=(old, new))
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
    changes = fold_commits(changes, old, new)
    # The rules on both sides: a change that produced a known-bad state says so, and ranks first.
    # Rules read facts only: the same facts on both sides hold the same findings (the
    # common cron case, an unchanged host), so nothing can be new and the rules need not run.
    found: list[Finding] = []
    after = None
    if _facts(old) != _facts(new):
        rule_options = RuleOptions(focus=ctx.focus, version_rules=tuple(ctx.options.version_rules))
        after = diagnose(new, rule_options)
        changes, found = apply_findings(changes, diagnose(old, rule_options), after)
    ranked = said_once(rank_changes(changes), after.findings if after is not None else [])
    summary = summarize(ranked, old, new, different)
    summary["known_bad"] = len([f for f in found if f.severity is not Severity.info])
    return DiffResult(changes=ranked, summary=summary, findings=found, after=after)


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
    a_name, b_name = old.host.hostname or old.host.name, new.host.hostname or new.host.name
    return a_name != b_name


def cloned_image(old: Snapshot, new: Snapshot) -> bool:
    """One machine id under two hostnames: a cloned image, or a renamed host."""
    a, b = _system_fact(old, "machine_id"), _system_fact(new, "machine_id")
    ha, hb = _system_fact(old, "hostname"), _system_fact(new, "hostname")
    return bool(a and a == b and ha and hb and ha != hb)


def summarize(
    changes: list[Change], old: Snapshot, new: Snapshot, different: bool
) -> dict[str, Any]:
    return {
        **tally(changes),
        "old": _side(old),
        "new": _side(new),
        "different_hosts": different,
        "cloned_image": cloned_image(old, new),
    }


def tally(changes: list[Change]) -> dict[str, Any]:
    """The summary's counts, over ranked changes. Counts, the total and the most likely
    cause are about drift: context findings change nothing that runs, and accepted or
    ignored ones were decided on, so none of them count (nor alert, nor set the exit code)."""
    drift = [change for change in changes if change.drift]
    counts = {s.value: 0 for s in Severity}
    for change in drift:
        counts[change.severity.value] += 1
    statuses = [change.status for change in changes]
    return {
        "total": len(drift),
        "counts": counts,
        "context": statuses.count("context"),
        "accepted": statuses.count("accepted"),
        "ignored": statuses.count("ignored"),
        "most_likely_cause": drift[0].cause if drift else None,
    }


def _side(snapshot: Snapshot) -> dict[str, Any]:
    return {
        "host": snapshot.host.name,
        "hostname": snapshot.host.hostname,
        "taken_at": snapshot.taken_at.isoformat(),
        "labels": list(snapshot.labels),
    }


def _system_fact(snapshot: Snapshot, key: str) -> Any:
    record = snapshot.probes.get("system")
    if record is None or record.status != ProbeStatus.ok:
        return snapshot.host.hostname if key == "hostname" else None
    return record.facts.get(key) or (snapshot.host.hostname if key == "hostname" else None)


def _facts(snapshot: Snapshot) -> dict[str, tuple[ProbeStatus, dict[str, Any]]]:
    return {name: (record.status, record.facts) for name, record in snapshot.probes.items()}


def _probe_order(old: Snapshot, new: Snapshot) -> list[str]:
    known = [name for name in AREA_RULES if name in old.probes or name in new.probes]
    rest = sorted((old.probes.keys() | new.probes.keys()) - AREA_RULES.keys())
    return known + rest
