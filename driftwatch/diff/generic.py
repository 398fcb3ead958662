"""The fallback rule: walk any facts key by key.

A probe added after these rules were written (or a field a probe grew) still shows up
as low-severity changes instead of vanishing; readings under ``volatile`` only appear
with --all, as info.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from driftwatch.facts import fmt
from driftwatch.diff.change import Change, Severity
from driftwatch.diff.context import DiffContext
from driftwatch.facts.read import Facts
from driftwatch.model import VOLATILE_KEY

# Probes without their own rules still get a category from PRODUCT.md's list.
CATEGORY_BY_PROBE = {
    "python": "package",
    "cuda": "cuda",
    "nccl": "nccl",
    "gpu": "gpu",
    "git": "git",
    "files": "file",
    "system": "system",
    "env": "env",
    "environment": "env",
    "processes": "process",
    "process": "process",
    "logs": "log",
    "log": "log",
    "launch_args": "launch-arg",
    "caches": "file",
    "nccl_conf": "env",
    "models": "file",
    "libraries": "file",
    "driver": "driver",
    "perf": "perf",
    "canary": "canary",
}


@dataclass(frozen=True, slots=True)
class Leaf:
    path: tuple[str, ...]
    old: Any
    new: Any
    volatile: bool

    @property
    def item(self) -> str:
        return ".".join(self.path)


def changed_keys(old: Facts, new: Facts) -> list[str]:
    """Keys whose values differ, sorted so the output does not depend on dict order.

    A key absent on one side and null on the other is not a change: a newer probe that
    adds a field which is null on this host has not found drift.
    """
    # Two passes over the dicts beat a set union plus lookups: this runs on 5,000 files.
    keys = [k for k, v in old.items() if new.get(k) != v]
    keys += [k for k, v in new.items() if v is not None and k not in old]
    keys.sort(key=str)
    return keys


def walk(
    old: Any, new: Any, path: tuple[str, ...], include_volatile: bool, volatile: bool = False
) -> Iterator[Leaf]:
    if old == new:
        return
    if not (isinstance(old, dict) and isinstance(new, dict)):
        yield Leaf(path, old, new, volatile)
        return
    for key in changed_keys(old, new):
        is_volatile = volatile or key == VOLATILE_KEY
        if is_volatile and not include_volatile:
            continue
        yield from walk(
            old.get(key), new.get(key), (*path, str(key)), include_volatile, is_volatile
        )


def sentence(subject: str, old: Any, new: Any) -> str:
    if old is None:
        return f"{subject} appeared: {fmt.value(new)}"
    if new is None:
        return f"{subject} disappeared (was {fmt.value(old)})"
    if isinstance(old, list) and isinstance(new, list):
        return f"{subject} changed: {list_delta(old, new)}"
    return f"{subject}: {fmt.value(old)} → {fmt.value(new)}"


def list_delta(old: list[Any], new: list[Any]) -> str:
    try:
        old_set, new_set = set(old), set(new)
        added = [str(x) for x in new if x not in old_set]
        removed = [str(x) for x in old if x not in new_set]
    except TypeError:  # unhashable members: say the whole value changed
        return f"{fmt.value(old)} → {fmt.value(new)}"
    parts = [f"+{fmt.value(x)}" for x in added] + [f"-{fmt.value(x)}" for x in removed]
    return ", ".join(parts[:6]) if parts else "order changed"


def leaf_changes(
    category: str, subject: str, leaves: Iterable[Leaf], severity: Severity = Severity.low
) -> list[Change]:
    """Changes for leaves under one subject (``"GPU 0 (NVIDIA H200)"``, ``"env probe"``)."""
    return [
        Change(
            category=category,
            item=leaf.item,
            old=leaf.old,
            new=leaf.new,
            severity=Severity.info if leaf.volatile else severity,
            explanation=sentence(f"{subject} {leaf.item}", leaf.old, leaf.new),
        )
        for leaf in leaves
    ]


def diff_generic(
    probe: str, old: Facts, new: Facts, ctx: DiffContext, skip: frozenset[str] = frozenset()
) -> list[Change]:
    """Every changed leaf of ``probe``'s facts outside ``skip`` (keys a rule already read)."""
    category = CATEGORY_BY_PROBE.get(probe, "system")
    old_rest = {k: v for k, v in old.items() if k not in skip}
    new_rest = {k: v for k, v in new.items() if k not in skip}
    return leaf_changes(category, f"{probe} probe:", walk(old_rest, new_rest, (), ctx.volatile))
