"""Source trees (the ``git`` probe): HEAD moves and uncommitted edits.

"No code changes since Feb 19" is checked here: a moved HEAD, or an uncommitted diff
that appeared, changed or went away.
"""

from __future__ import annotations

from typing import Any

from driftwatch.facts import fmt
from driftwatch.diff.change import Change, Severity
from driftwatch.diff.context import DiffContext
from driftwatch.facts.read import Facts, as_dict
from driftwatch.diff.generic import changed_keys

KEYS = frozenset({"repos"})


def diff_git(old: Facts, new: Facts, ctx: DiffContext) -> list[Change]:
    old_repos, new_repos = as_dict(old.get("repos")), as_dict(new.get("repos"))
    changes: list[Change] = []
    for key in changed_keys(old_repos, new_repos):
        o, n = old_repos.get(key), new_repos.get(key)
        if not isinstance(o, dict) or not isinstance(n, dict):
            changes.append(_presence(key, as_dict(o), as_dict(n), o is None))
        elif o.get("error") or n.get("error"):
            changes += (
                [_error(key, o.get("error"), n.get("error"))]
                if o.get("error") != n.get("error")
                else []
            )
        else:
            changes += [
                c for c in (_head(key, o, n), _branch(key, o, n), _worktree(key, o, n)) if c
            ]
    return changes


def _head(key: str, old: Facts, new: Facts) -> Change | None:
    if old.get("head") == new.get("head"):
        return None
    o, n = fmt.short(old.get("head")), fmt.short(new.get("head"))
    subjects = (
        _subject(new) if _subject(old) == _subject(new) else f"{_subject(old)} → {_subject(new)}"
    )
    text = f"{key} HEAD moved {o} → {n} ({subjects}{_describe(new)}): the source code changed"
    return Change("git", key, o, n, Severity.high, text, magnitude=1.0)


def _branch(key: str, old: Facts, new: Facts) -> Change | None:
    if old.get("branch") == new.get("branch"):
        return None
    # Same HEAD on another branch changes nothing that runs; a moved HEAD is reported above.
    was, now = old.get("branch") or "(detached)", new.get("branch") or "(detached)"
    same_commit = old.get("head") == new.get("head")
    text = f"{key} is on branch {now} (was {was})" + (", same commit" if same_commit else "")
    return Change("git", key, old.get("branch"), new.get("branch"), Severity.low, text, context=same_commit)


def _worktree(key: str, old: Facts, new: Facts) -> Change | None:
    od, nd = _dirty(old), _dirty(new)
    if od == nd and old.get("diff_sha256") == new.get("diff_sha256"):
        return None
    o, n = _state(od, old), _state(nd, new)
    if od and not nd:
        text = (
            f"{key} is clean now: the uncommitted edits to {fmt.listing(od)} "
            "were reverted or committed"
        )
    elif nd and not od:
        text = f"{key} has uncommitted edits now: {fmt.listing(nd)}"
    elif od != nd:
        gone, added = [p for p in od if p not in set(nd)], [p for p in nd if p not in set(od)]
        parts = ([f"now also {fmt.listing(added)}"] if added else []) + (
            [f"no longer {fmt.listing(gone)}"] if gone else []
        )
        text = f"{key} uncommitted edits changed: {'; '.join(parts)}"
    else:
        text = f"{key} uncommitted diff changed in the same files ({fmt.listing(nd)}): edited again"
    return Change("git", key, o, n, Severity.medium, text, magnitude=len(set(od) ^ set(nd)) + 0.5)


def _presence(key: str, old: Facts, new: Facts, added: bool) -> Change:
    if added:
        text = f"repo {key} is now recorded at {fmt.short(new.get('head'))}"
        return Change("git", key, None, fmt.short(new.get("head")), Severity.low, text)
    text = f"repo {key} is no longer recorded (was at {fmt.short(old.get('head'))})"
    return Change("git", key, fmt.short(old.get("head")), None, Severity.medium, text)


def _error(key: str, old_error: Any, new_error: Any) -> Change:
    if new_error and not old_error:
        return Change(
            "git",
            key,
            None,
            new_error,
            Severity.medium,
            f"{key} can no longer be read as a git repo: {fmt.value(new_error)}",
        )
    if old_error and not new_error:
        return Change(
            "git",
            key,
            old_error,
            None,
            Severity.info,
            f"{key} is readable again (was: {fmt.value(old_error)}); not compared this time",
        )
    return Change(
        "git",
        key,
        old_error,
        new_error,
        Severity.low,
        f"{key} still unreadable: {fmt.value(new_error)}",
    )


def _dirty(repo: Facts) -> list[str]:
    dirty = repo.get("dirty")
    return [str(p) for p in dirty] if isinstance(dirty, list) else []


def _state(dirty: list[str], repo: Facts) -> str:
    if not dirty:
        return "clean"
    return f"{fmt.plural(len(dirty), 'dirty file')}, diff {fmt.short(repo.get('diff_sha256'), 12)}"


def _subject(repo: Facts) -> str:
    subject = repo.get("subject")
    return f'"{fmt.value(subject)}"' if subject else "?"


def _describe(repo: Facts) -> str:
    return f", now {repo.get('describe')}" if repo.get("describe") else ""
