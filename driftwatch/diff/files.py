"""Watched files (the ``files`` probe): content by sha256, not by timestamp.

An mtime that moved over identical content is the "edited and reverted" case, which
must read differently from an edit that was left in place. A walk that stopped at its bound
(``truncated``) did not look at every file: a file it did not list is not known to be gone
(or new), so it is counted in one note instead of reported removed or added.
"""

from __future__ import annotations

from driftwatch.facts import fmt
from driftwatch.diff.change import Change, Severity
from driftwatch.diff.context import DiffContext
from driftwatch.facts.names import under_home
from driftwatch.facts.read import Facts, as_dict
from driftwatch.diff.generic import changed_keys

KEYS = frozenset({"patterns", "files", "truncated", "truncated_reason", "home"})

# Content that changes what runs: code, compiled code, kernels, configuration.
SOURCE_SUFFIXES = (
    ".py",
    ".so",
    ".cu",
    ".cuh",
    ".cpp",
    ".h",
    ".json",
    ".yaml",
    ".yml",
    ".toml",
    ".cfg",
    ".ini",
    ".sh",
)


def diff_files(old: Facts, new: Facts, ctx: DiffContext) -> list[Change]:
    old_files, new_files = as_dict(old.get("files")), as_dict(new.get("files"))
    if old.get("home") and new.get("home") and old["home"] != new["home"]:  # another user: ~/x on both
        old_files, new_files = under_home(old_files, old["home"]), under_home(new_files, new["home"])
    changes = [_watch_list(old, new)] if old.get("patterns") != new.get("patterns") else []
    if old.get("truncated") != new.get("truncated"):
        state = f"truncated ({_reason(new)})" if new.get("truncated") else "complete again"
        text = f"the watched file list is {state}: files beyond the limit are not compared"
        changes.append(Change("file", "(file list)", old.get("truncated"), new.get("truncated"), Severity.info, text))
    unlisted = 0
    for path in changed_keys(old_files, new_files):
        o, n = old_files.get(path), new_files.get(path)
        if (o is None and old.get("truncated")) or (n is None and new.get("truncated")):
            unlisted += 1  # the walk that does not list it stopped early: absent is not known
            continue
        change = _one_file(
            path, as_dict(o) if o is not None else None, as_dict(n) if n is not None else None
        )
        if change is not None:
            changes.append(change)
    if unlisted:
        changes.append(_unlisted(unlisted, old, new))
    return changes


def _reason(facts: Facts) -> str:
    return str(facts.get("truncated_reason") or "more files matched than max_files")


def _unlisted(count: int, old: Facts, new: Facts) -> Change:
    sides = [(side, facts) for side, facts in (("old", old), ("new", new)) if facts.get("truncated")]
    why = "; ".join(f"the {side} walk stopped early: {_reason(facts)}" for side, facts in sides)
    noun = "file" if count == 1 else "files"
    text = f"{count} {noun} listed on one side only not compared ({why})"
    return Change("file", "(file list)", None, count, Severity.info, text)


def _watch_list(old: Facts, new: Facts) -> Change:
    text = (
        "the watched file patterns changed (config edit): "
        "files added or removed below may only be newly watched"
    )
    return Change(
        "file", "(patterns)", old.get("patterns"), new.get("patterns"), Severity.info, text
    )


def _one_file(path: str, old: Facts | None, new: Facts | None) -> Change | None:
    source = path.endswith(SOURCE_SUFFIXES)
    if old is None or new is None:
        return _presence(path, old, new, source)
    if old.get("error") or new.get("error"):
        return _unhashed(path, old, new)
    if old.get("sha256") != new.get("sha256"):
        text = (
            f"{path} edited, content differs (size {fmt.size(old.get('size'))} → "
            f"{fmt.size(new.get('size'))}, modified {fmt.when(new.get('mtime')) or '?'})"
        )
        o, n = fmt.short(old.get("sha256"), 12), fmt.short(new.get("sha256"), 12)
        return Change(
            "file", path, o, n, Severity.medium if source else Severity.low, text, magnitude=1.0
        )
    o, n = fmt.when_pair(old.get("mtime"), new.get("mtime"))
    if o != n:  # mtimes that read the same to the microsecond (float noise) say nothing
        text = f"{path} edited and reverted, or touched — content identical (mtime {o} → {n})"
        return Change("file", path, o, n, Severity.info, text, context=True)
    if old.get("mode") != new.get("mode"):
        text = f"{path} mode {old.get('mode')} → {new.get('mode')}"
        return Change("file", path, old.get("mode"), new.get("mode"), Severity.low, text)
    return None  # only fields that say nothing about content (e.g. size recomputed) differ


def _presence(path: str, old: Facts | None, new: Facts | None, source: bool) -> Change:
    if old is None:
        n = as_dict(new)
        text = f"{path} is new (modified {fmt.when(n.get('mtime')) or '?'})"
        return Change(
            "file",
            path,
            None,
            fmt.short(n.get("sha256"), 12),
            Severity.medium if source else Severity.low,
            text,
        )
    text = f"{path} was deleted (last modified {fmt.when(old.get('mtime')) or '?'})"
    return Change("file", path, fmt.short(old.get("sha256"), 12), None, Severity.medium, text)


# A file the walk had no time left to hash (files_collect.py): not a fact about the file.
OUT_OF_TIME = "not hashed: out of time"


def _unhashed(path: str, old: Facts, new: Facts) -> Change | None:
    # Without digests on both sides only size and mtime can say anything. A file left
    # unhashed for time is no error of the file's: only its stat is compared.
    transient = OUT_OF_TIME in (old.get("error"), new.get("error"))
    if old.get("error") != new.get("error") and not transient:
        text = f"{path} could not be hashed: {fmt.value(new.get('error') or old.get('error'))}"
        return Change("file", path, old.get("error"), new.get("error"), Severity.low, text)
    if (old.get("size"), old.get("mtime")) == (new.get("size"), new.get("mtime")):
        return None
    text = (
        f"{path} size or mtime changed "
        f"({fmt.size(old.get('size'))} → {fmt.size(new.get('size'))}), "
        f"but its content is unknown ({fmt.value(new.get('error') or old.get('error'))})"
    )
    return Change(
        "file", path, *fmt.when_pair(old.get("mtime"), new.get("mtime")), Severity.low, text
    )
