"""Compile and JIT caches (the ``caches`` probe), read against the packages that fill them.

A cache entry that changed says what changed (objects rebuilt, added, removed). When the
package that filled it was reinstalled or upgraded between the two snapshots, the sentence
says so too, and how many of the entry's objects predate that install: the state in which
FlashInfer linked a half-stale kernel after a same-version reinstall
(flashinfer-ai/flashinfer#4489). An entry left untouched by such a reinstall is reported
by :func:`stale_entries`, which runs whatever else changed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from driftwatch.facts import fmt
from driftwatch.diff.change import Change, Severity
from driftwatch.diff.context import DiffContext
from driftwatch.facts.read import Facts, as_dict, normalize_name
from driftwatch.diff.generic import changed_keys

KEYS = frozenset({"caches", "locations_error"})
# Caches whose entries outlive a reinstall of their owner and are then used as they are:
# FlashInfer keys its JIT builds by version only, torch extensions by Python and CUDA
# version only. Triton, Inductor, vLLM and SGLang key each entry by a hash that covers
# the compiler's own build, so a reinstall leaves their old entries unused, not stale.
STALE_ON_REINSTALL = frozenset({"flashinfer", "torch_extensions"})


@dataclass(frozen=True)
class Reinstall:
    """What happened to the distribution that owns a cache entry between two snapshots."""

    package: str
    old_version: Any
    new_version: Any
    installed_at: float | None
    files_changed: bool | None  # RECORD digest differs; None when there is none to tell

    def sentence(self) -> str:
        at = fmt.when(self.installed_at)
        if self.old_version != self.new_version:
            return f"{self.package} {self.old_version} → {self.new_version}" + (f" (installed {at})" if at else "")
        detail = [f"installed {at}"] if at else []
        detail += ["identical files"] if self.files_changed is False else []
        return f"{self.package} {self.new_version} was reinstalled" + (f" ({', '.join(detail)})" if detail else "")


def owner_change(ctx: DiffContext, owner: Any) -> Reinstall | None:
    """The reinstall or upgrade of ``owner`` (``{"package", "version"}``) in any interpreter,
    or None. A versioned entry (``~/.cache/flashinfer/0.6.12``) belongs to that version only."""
    owner = as_dict(owner)
    package = normalize_name(str(owner.get("package") or ""))
    old_py, new_py = ctx.facts_of("python")
    old_interps, new_interps = as_dict(old_py.get("interpreters")), as_dict(new_py.get("interpreters"))
    for key in sorted(new_interps.keys() & old_interps.keys()):
        o = as_dict(as_dict(as_dict(old_interps[key]).get("distributions")).get(package))
        n = as_dict(as_dict(as_dict(new_interps[key]).get("distributions")).get(package))
        if not o or not n or (owner.get("version") and n.get("version") != owner["version"]):
            continue
        old_rec, new_rec = o.get("record_sha256"), n.get("record_sha256")
        if (o.get("version"), o.get("installed_at"), old_rec) != (n.get("version"), n.get("installed_at"), new_rec):
            files_changed = old_rec != new_rec if old_rec and new_rec else None
            return Reinstall(package, o.get("version"), n.get("version"), fmt.number(n.get("installed_at")),
                             files_changed)
    return None


def diff_caches(old: Facts, new: Facts, ctx: DiffContext) -> list[Change]:
    old_caches, new_caches = as_dict(old.get("caches")), as_dict(new.get("caches"))
    changes: list[Change] = []
    for key in changed_keys(old_caches, new_caches):
        o, n = old_caches.get(key), new_caches.get(key)
        if not isinstance(o, dict) or not isinstance(n, dict):
            changes.append(_watched(key, o, n))
        else:
            changes += _cache(key, o, n, ctx)
    return changes


def stale_entries(ctx: DiffContext) -> list[Change]:
    """Entries identical in both snapshots whose owner was reinstalled or upgraded after
    they were built: the new install runs the old build's objects."""
    old, new = ctx.facts_of("caches")
    old_caches, new_caches = as_dict(old.get("caches")), as_dict(new.get("caches"))
    changes: list[Change] = []
    for key in sorted(old_caches.keys() & new_caches.keys()):
        o_cache, n_cache = as_dict(old_caches[key]), as_dict(new_caches[key])
        if n_cache.get("layout") not in STALE_ON_REINSTALL:
            continue
        o_entries, n_entries = as_dict(o_cache.get("entries")), as_dict(n_cache.get("entries"))
        for name in sorted(o_entries.keys() & n_entries.keys()):
            entry = as_dict(n_entries[name])
            if o_entries[name] != entry or entry.get("files") is None:
                continue  # changed entries are diff_caches' to explain
            reinstall = owner_change(ctx, entry.get("owner"))
            newest = fmt.number(entry.get("newest"))
            if reinstall is None or reinstall.installed_at is None or newest is None or newest >= reinstall.installed_at:
                continue
            text = (f"{_where(key, name)} unchanged ({_count(entry)}, newest {fmt.when(newest)}) while "
                    f"{reinstall.sentence()}: every cached object predates that install")
            # A reinstall with identical files: the objects were built from what is installed now.
            changes.append(Change("file", _where(key, name), fmt.when(newest), fmt.when(reinstall.installed_at),
                                  _stale_severity(reinstall), text, magnitude=1.0,
                                  context=reinstall.files_changed is False))
    return changes + reused_compile_keys(ctx)




def reused_compile_keys(ctx: DiffContext) -> list[Change]:
    """A vLLM torch.compile cache entry reused (no new key directory) after a server variable
    changed that its recorded key factors do not include: if the variable shapes the graph, the
    server now runs the graph compiled for the old value (vLLM's key missed
    VLLM_PP_LAYER_PARTITION until PR #14953)."""
    changed = _server_env_changes(*ctx.facts_of("processes"))
    if not changed:
        return []
    old, new = ctx.facts_of("caches")
    old_caches, new_caches = as_dict(old.get("caches")), as_dict(new.get("caches"))
    changes: list[Change] = []
    for key in sorted(old_caches.keys() & new_caches.keys()):
        if as_dict(new_caches[key]).get("layout") != "vllm":
            continue
        o_entries, n_entries = as_dict(as_dict(old_caches[key]).get("entries")), as_dict(as_dict(new_caches[key]).get("entries"))
        for name in sorted(o_entries.keys() & n_entries.keys()):
            o_keys, n_keys = as_dict(as_dict(o_entries[name]).get("keys")), as_dict(as_dict(n_entries[name]).get("keys"))
            if not n_keys or set(n_keys) != set(o_keys):
                continue  # no key recorded, or a new key directory: vLLM compiled again
            covered = {v for k in n_keys.values() for v in as_dict(as_dict(k).get("env"))}
            missed = {var: pair for var, pair in changed.items() if var not in covered}
            if not missed:
                continue
            where = f"{key.rstrip('/')}/{name}"
            dirs = sorted({rel.rsplit("/", 2)[0] for rel in n_keys})
            said = ", ".join(f"{var} {fmt.value(o)} → {fmt.value(n)}" for var, (o, n) in sorted(missed.items()))
            text = (f"{where} was reused as it was ({fmt.listing(dirs, 2)}, no new compile key) while the server's "
                    f"{said}: its recorded key factors (cache_key_factors.json) do not include "
                    f"{fmt.listing(sorted(missed), 2)}, so where that shapes the compiled graph the server runs the graph "
                    f"built for the old value (clear {where} or set VLLM_DISABLE_COMPILE_CACHE=1; vllm PR #14953)")
            # It says why the changed variables have no effect: it heads their changes.
            changes.append(Change("file", where, None, said, Severity.medium, text, magnitude=1.0,
                                  carries=tuple(("env", var) for var in sorted(missed))))
    return changes


def _server_env_changes(old: Facts, new: Facts) -> dict[str, tuple[object, object]]:
    """vLLM variables of a server (the same key on both sides) whose value changed."""
    found: dict[str, tuple[object, object]] = {}
    old_servers, new_servers = as_dict(old.get("servers")), as_dict(new.get("servers"))
    for server in sorted(old_servers.keys() & new_servers.keys()):
        o_env, n_env = as_dict(as_dict(old_servers[server]).get("env")), as_dict(as_dict(new_servers[server]).get("env"))
        for var in sorted((o_env.keys() | n_env.keys())):
            if var.startswith("VLLM_") and o_env.get(var) != n_env.get(var):
                found.setdefault(var, (o_env.get(var), n_env.get(var)))
    return found


def _cache(key: str, old: Facts, new: Facts, ctx: DiffContext) -> list[Change]:
    if old.get("exists") != new.get("exists") or old.get("error") != new.get("error"):
        return [_presence(key, old, new)]
    changes = []
    if old.get("truncated") != new.get("truncated"):
        state = f"cut short ({new.get('truncated')})" if new.get("truncated") else "complete again"
        text = f"the listing of {key} is {state}: entries it did not reach are not compared"
        changes.append(Change("file", key, old.get("truncated"), new.get("truncated"), Severity.info, text))
    layout = new.get("layout")
    o_entries, n_entries = as_dict(old.get("entries")), as_dict(new.get("entries"))
    for name in changed_keys(o_entries, n_entries):
        change = _entry(key, name, o_entries.get(name), n_entries.get(name), layout, ctx)
        changes += [change] if change else []
    return changes


def _entry(key: str, name: str, old: Any, new: Any, layout: Any, ctx: DiffContext) -> Change | None:
    where = _where(key, name)
    if not isinstance(old, dict) or not isinstance(new, dict):
        entry = as_dict(new if isinstance(new, dict) else old)
        newest = f", newest {fmt.when(entry.get('newest'))}" if entry.get("newest") else ""
        state = f"is new ({_count(entry)}{newest})" if isinstance(new, dict) else f"was removed (had {_count(entry)})"
        return Change("file", where, None if isinstance(new, dict) else _count(entry),
                      _count(entry) if isinstance(new, dict) else None, Severity.low, f"{where} {state}")
    if old.get("files") is None or new.get("files") is None or old.get("truncated") or new.get("truncated"):
        return None  # a listing cut short on either side compares nothing
    if old.get("digest") == new.get("digest"):
        return None  # only what no listing shows (the owner's label, the walk's bookkeeping)
    delta, rebuilt, total = _delta(old, new)
    text = f"{where}: {delta} (newest {fmt.when(new.get('newest')) or '?'})"
    severity = Severity.medium if rebuilt else Severity.low
    reinstall = owner_change(ctx, new.get("owner")) if layout in STALE_ON_REINSTALL else None
    if reinstall is not None and reinstall.installed_at is not None:
        older = _older_than(new, reinstall.installed_at)
        text += f" while {reinstall.sentence()}"
        if older:
            text += f": {older} of {total} objects predate that install" if total else ": files older than that install remain"
            severity = max(severity, _stale_severity(reinstall), key=lambda s: s.rank)
    return Change("file", where, fmt.short(old.get("digest"), 12), fmt.short(new.get("digest"), 12), severity, text,
                  magnitude=1.0 if rebuilt else 0.5)


def _delta(old: Facts, new: Facts) -> tuple[str, bool, int]:
    """What changed in an entry in words, whether existing objects were rebuilt or removed,
    and how many objects it now holds."""
    o_objects, n_objects = old.get("objects"), new.get("objects")
    total = int(new.get("object_count") or 0)
    if isinstance(o_objects, dict) and isinstance(n_objects, dict):
        changed = sum(1 for rel, value in n_objects.items() if rel in o_objects and o_objects[rel] != value)
        added = len(n_objects.keys() - o_objects.keys())
        removed = len(o_objects.keys() - n_objects.keys())
        parts = [f"{changed} of {total} objects changed"] if changed else []
        parts += [f"{added} added"] if added else []
        parts += [f"{removed} removed"] if removed else []
        if parts:
            return ", ".join(parts), bool(changed or removed), total
    files = f"{old.get('files'):,} → {new.get('files'):,} files" if old.get("files") != new.get("files") else "files changed"
    return f"{files} ({fmt.size(old.get('bytes'))} → {fmt.size(new.get('bytes'))})", True, total


def _older_than(entry: Facts, when: float) -> int:
    """Objects (or, without a list, at least the oldest file) older than ``when``."""
    objects = entry.get("objects")
    if isinstance(objects, dict):
        return sum(1 for value in objects.values() if isinstance(value, list) and value[1:] and value[1] < when)
    oldest = fmt.number(entry.get("oldest"))
    return 1 if oldest is not None and oldest < when else 0


def _stale_severity(reinstall: Reinstall) -> Severity:
    # Identical files: the objects were built from what is installed now.
    return Severity.info if reinstall.files_changed is False else Severity.high


def _presence(key: str, old: Facts, new: Facts) -> Change:
    entries = len(as_dict(new.get("entries") or old.get("entries")))
    if new.get("error"):
        text = f"{key} could not be listed: {fmt.value(new.get('error'))}"
    elif old.get("error"):
        text = f"{key} can be listed again (was: {fmt.value(old.get('error'))})"
    elif new.get("exists"):
        text = f"{key} was created ({fmt.plural(entries, 'entry')})"
    else:
        text = f"{key} is gone (had {fmt.plural(entries, 'entry')}): what it cached is rebuilt on next use"
    o, n = (old.get("error") or old.get("exists")), (new.get("error") or new.get("exists"))
    return Change("file", key, o, n, Severity.low, text)


def _watched(key: str, old: Any, new: Any) -> Change:
    cache = as_dict(new if isinstance(new, dict) else old)
    via = f" (via {', '.join(cache.get('via') or [])})" if cache.get("via") else ""
    state = "is now watched" if isinstance(new, dict) else "is no longer watched"
    return Change("file", key, None if isinstance(new, dict) else key, key if isinstance(new, dict) else None,
                  Severity.info, f"cache directory {key}{via} {state}")


def _where(key: str, name: str) -> str:
    return f"{key.rstrip('/')}/{name}"


def _count(entry: Facts) -> str:
    files = entry.get("files")
    objects = entry.get("object_count")
    text = fmt.plural(files, "file") if isinstance(files, int) else "? files"
    return text + (f", {fmt.plural(objects, 'object')}" if isinstance(objects, int) and objects else "")
