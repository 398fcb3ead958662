"""Model files (the ``models`` probe): the files that change what a model says.

A changed ``generation_config.json``, tokenizer or chat template changes output with every
package identical, so each is named with the revision move and, for JSON, the keys whose
values changed: ``Qwen/Qwen3-8B generation_config.json changed (revision 3f2a9c4… →
9b1c0d2…): temperature 0.6 → 1.0``. Weights are summarised in one line. A revision that
moved with no file of interest changing is context.
"""

from __future__ import annotations

from typing import Any

from driftwatch.facts import fmt
from driftwatch.diff.change import Change, Severity
from driftwatch.diff.context import DiffContext
from driftwatch.facts.read import Facts, as_dict
from driftwatch.diff.generic import changed_keys

KEYS = frozenset({"models", "servers_error"})
MAX_KEYS_NAMED = 3


def diff_models(old: Facts, new: Facts, ctx: DiffContext) -> list[Change]:
    old_models, new_models = as_dict(old.get("models")), as_dict(new.get("models"))
    changes: list[Change] = []
    for key in changed_keys(old_models, new_models):
        o, n = old_models.get(key), new_models.get(key)
        if isinstance(o, dict) and isinstance(n, dict):
            changes += _model(key, o, n)
        else:
            seen = as_dict(n if isinstance(n, dict) else o)
            state = "is now" if isinstance(n, dict) else "is no longer"
            text = f"model {key} {state} described ({', '.join(seen.get('sources') or []) or 'no source'})"
            changes.append(Change("file", key, None if n else key, key if n else None, Severity.info, text))
    return changes


def _model(key: str, old: Facts, new: Facts) -> list[Change]:
    for field in ("kind", "exists", "error"):
        if old.get(field) != new.get(field):
            return [_state(key, field, old, new)]
    revision = _revision(old, new)
    old_files, new_files = as_dict(old.get("files")), as_dict(new.get("files"))
    found = (_small_file(key, rel, old_files.get(rel), new_files.get(rel), revision)
             for rel in changed_keys(old_files, new_files))
    changes = [change for change in found if change is not None]
    weights = _weights(key, as_dict(old.get("weights")), as_dict(new.get("weights")), revision)
    changes += [weights] if weights else []
    if revision and not any(c.severity.rank > Severity.info.rank for c in changes):
        text = f"{key} {revision}: no file that changes behaviour differs"
        changes.append(Change("file", key, old.get("revision"), new.get("revision"), Severity.info, text,
                              context=True))
    return changes


def _small_file(key: str, rel: str, old: Any, new: Any, revision: str | None) -> Change | None:
    item = f"{key}/{rel}"
    if not isinstance(old, dict) or not isinstance(new, dict):
        state = "is new" if isinstance(new, dict) else "was removed"
        moved = f" ({revision})" if revision else ""
        return Change("file", item, _identity(old), _identity(new), Severity.high, f"{key} {rel} {state}{moved}")
    if old.get("error") != new.get("error"):
        text = f"{key} {rel} " + (f"cannot be read: {new['error']}" if new.get("error") else "can be read again")
        return Change("file", item, old.get("error"), new.get("error"), Severity.low, text)
    if _identity(old) == _identity(new):
        if old.get("mtime") != new.get("mtime"):
            text = f"{key} {rel} touched, content identical (mtime {fmt.when(old.get('mtime'))} → {fmt.when(new.get('mtime'))})"
            return Change("file", item, fmt.when(old.get("mtime")), fmt.when(new.get("mtime")), Severity.info, text,
                          context=True)
        return None
    how = revision or f"sha256 {fmt.short(_identity(old))}… → {fmt.short(_identity(new))}…"
    values = _values(old.get("values"), new.get("values"))
    text = f"{key} {rel} changed ({how})" + (f": {values}" if values else "")
    return Change("file", item, fmt.short(_identity(old), 12), fmt.short(_identity(new), 12), Severity.high, text,
                  magnitude=1.0)


def _weights(key: str, old: Facts, new: Facts, revision: str | None) -> Change | None:
    names = changed_keys(old, new)
    changed = [n for n in names if n in old and n in new and _weight_identity(old[n]) != _weight_identity(new[n])]
    added, removed = [n for n in names if n not in old], [n for n in names if n not in new]
    if not (changed or added or removed):
        return None
    parts = [f"{len(changed)} of {len(new)} weight files changed"] if changed else []
    parts += [f"{len(added)} added"] if added else []
    parts += [f"{len(removed)} removed"] if removed else []
    first = (changed or added or removed)[0]
    o, n = as_dict(old.get(first)), as_dict(new.get(first))
    detail = f"{first}: {fmt.size(o.get('size')) if o else 'none'} → {fmt.size(n.get('size')) if n else 'none'}"
    moved = f", {revision}" if revision else ""
    text = f"{key} weights: {', '.join(parts)} ({detail}{moved})"
    return Change("file", f"{key} weights", len(old), len(new), Severity.high, text, magnitude=1.0)


def _values(old: Any, new: Any) -> str:
    """``temperature 0.6 → 1.0, top_k added: 20``: the top-level keys whose values differ."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        return ""
    parts = []
    for name in changed_keys(old, new):
        if name not in old:
            parts.append(f"{name} added: {fmt.value(new[name])}")
        elif name not in new:
            parts.append(f"{name} removed (was {fmt.value(old[name])})")
        else:
            parts.append(f"{name} {fmt.value(old[name])} → {fmt.value(new[name])}")
    more = len(parts) - MAX_KEYS_NAMED
    return ", ".join(parts[:MAX_KEYS_NAMED]) + (f" and {more} more" if more > 0 else "")


def _revision(old: Facts, new: Facts) -> str | None:
    o, n = old.get("revision"), new.get("revision")
    if o == n or not (o or n):
        return None
    return f"revision {fmt.short(o) or 'none'}… → {fmt.short(n) or 'none'}…"


def _state(key: str, field: str, old: Facts, new: Facts) -> Change:
    if field == "kind":
        text = f"{key} is now a {new.get('kind')} model (was {old.get('kind')})"
    elif field == "exists":
        text = f"{key} {'is present again' if new.get('exists') else 'is gone'} ({fmt.value(new.get('path'))})"
    else:
        text = f"{key} " + (f"cannot be read: {fmt.value(new.get('error'))}" if new.get("error") else "can be read again")
    return Change("file", key, old.get(field), new.get(field), Severity.high, text)


def _identity(entry: Any) -> Any:
    entry = as_dict(entry)
    return entry.get("blob") or entry.get("sha256")


def _weight_identity(entry: Any) -> Any:
    entry = as_dict(entry)
    return entry.get("blob") or (entry.get("size"), entry.get("mtime"))
