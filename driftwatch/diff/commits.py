"""One cause, one finding: a moved commit is one change naming what it moved.

When a working tree's HEAD moves, the git rule reports it; an editable install of that
tree reports a new source commit, and every watched file of the tree whose content came
with the commit reports an edit. They are one cause. This folds the editable installs and
the files into the commit's finding, which then names them.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from driftwatch.facts import fmt
from driftwatch.diff.change import Change
from driftwatch.facts.read import Facts, as_dict, ok_facts
from driftwatch.model import Snapshot


def fold_commits(changes: list[Change], old: Snapshot, new: Snapshot) -> list[Change]:
    old_repos, new_repos = as_dict(ok_facts(old, "git").get("repos")), as_dict(ok_facts(new, "git").get("repos"))
    folded: list[Change] = list(changes)
    for key in sorted(old_repos.keys() & new_repos.keys()):
        o, n = as_dict(old_repos[key]), as_dict(new_repos[key])
        if o.get("error") or n.get("error") or not n.get("head") or o.get("head") == n.get("head"):
            continue
        folded = _fold_repo(folded, key, o, n, old, new)
    return folded


def _fold_repo(
    changes: list[Change], key: str, old: Facts, new: Facts, old_snapshot: Snapshot, new_snapshot: Snapshot
) -> list[Change]:
    heads = {fmt.short(old.get("head")), fmt.short(new.get("head"))}
    # Installed from this tree on both sides (each at its side's HEAD); the same folding
    # whichever snapshot is called old.
    installs = _editable_from(old_snapshot, str(old.get("head"))) & _editable_from(new_snapshot, str(new.get("head")))
    same_root = old.get("path") == new.get("path")
    root = str(new.get("path") or "").rstrip("/") if same_root else ""
    # With uncommitted edits on either side, a file's change may be one of them.
    clean = not old.get("dirty") and not new.get("dirty")

    def moved_with(change: Change) -> bool:
        if change.category == "package" and change.item in installs:
            return {change.old, change.new} <= heads
        if change.category == "file" and clean and root and change.drift:
            return str(change.item).startswith(root + "/") and change.new is not None and change.old is not None
        return False

    commit = next((c for c in changes if c.category == "git" and c.item == key and {c.old, c.new} == heads), None)
    if commit is None:
        return changes
    riders = [c for c in changes if moved_with(c)]
    if not riders:
        return changes
    packages = [f"the editable install {c.item}" for c in riders if c.category == "package"]
    files = [str(c.item)[len(root) + 1 :] for c in riders if c.category == "file"]
    parts = packages + ([f"{fmt.plural(len(files), 'watched file')} ({fmt.listing(files)})"] if files else [])
    severity = max([commit.severity, *(c.severity for c in riders)], key=lambda s: s.rank)
    merged = replace(
        commit, severity=severity, explanation=f"{commit.explanation}; it moved {' and '.join(parts)}",
        magnitude=commit.magnitude + len(riders), focus=commit.focus or any(c.focus for c in riders),
    )
    return [merged if c is commit else c for c in changes if c not in riders]


def _editable_from(snapshot: Snapshot, head: str) -> set[str]:
    """Names of editable distributions installed from a tree now at ``head``."""
    names: set[str] = set()
    for interpreter in as_dict(ok_facts(snapshot, "python").get("interpreters")).values():
        for name, dist in as_dict(as_dict(interpreter).get("distributions")).items():
            d: Any = as_dict(dist)
            if d.get("editable") and d.get("source_commit") == head:
                names.add(str(name))
    return names
