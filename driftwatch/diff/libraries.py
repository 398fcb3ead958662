"""Shared libraries as they are on disk and in the servers' memory (the ``libraries`` probe).

The version in a file name or a wheel's metadata is not the build: two libnccl.so.2 of
"2.28.9" can differ (pip's and the OS package's), and a server can load another copy than
the one its interpreter installed. These rules compare the builds (GNU build-id, size)
of what each server maps, by library name, and of the NCCL/CUDA libraries installed;
the distributions' own files against their RECORD are in ``diff/integrity.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from driftwatch.facts import fmt
from driftwatch.diff.change import Change, Severity
from driftwatch.diff.context import DiffContext
from driftwatch.facts.read import Facts, as_dict
from driftwatch.diff.integrity import diff_integrity
from driftwatch.facts.loader import display_version, file_name, how_found, older
from driftwatch.facts.names import file_category, owned_by, short_path

KEYS = frozenset({"files", "servers", "servers_error", "interpreters", "system", "integrity", "truncated",
                  "resolution"})
DELETED = " (deleted)"


def diff_libraries(old: Facts, new: Facts, ctx: DiffContext) -> list[Change]:
    old_files, new_files = as_dict(old.get("files")), as_dict(new.get("files"))
    changes: list[Change] = []
    if not old.get("servers_error") and not new.get("servers_error"):
        old_servers, new_servers = as_dict(old.get("servers")), as_dict(new.get("servers"))
        for server in sorted(old_servers.keys() & new_servers.keys()):
            changes += _server(server, as_dict(old_servers[server]), as_dict(new_servers[server]), old_files, new_files)
    elif old.get("servers_error") != new.get("servers_error"):
        changes.append(_unknown("servers", old.get("servers_error"), new.get("servers_error")))
    mapped = {path for libs in as_dict(new.get("servers")).values() for paths in as_dict(libs).values() for path in paths}
    changes += _installed(old, new, old_files, new_files, mapped)
    changes += diff_resolution(as_dict(old.get("resolution")), as_dict(new.get("resolution")), old_files, new_files)
    changes += diff_integrity(as_dict(old.get("integrity")), as_dict(new.get("integrity")))
    if old.get("truncated") != new.get("truncated"):
        state = "more libraries than the bound: some are not described" if new.get("truncated") else "complete again"
        changes.append(Change("file", "(libraries)", old.get("truncated"), new.get("truncated"), Severity.info,
                              f"the library list is {state}"))
    return changes


# ---- what each server maps -------------------------------------------------------------


def _server(server: str, old: Facts, new: Facts, old_files: Facts, new_files: Facts) -> list[Change]:
    changes: list[Change] = []
    rebuilt: list[Rebuilt] = []
    for name in sorted(old.keys() & new.keys()):
        o, n = list(old[name] or []), list(new[name] or [])
        if o != n:
            changes.append(_now_maps(server, name, o, n, old_files, new_files))
        elif len(n) == 1:
            before, after = as_dict(old_files.get(n[0])), as_dict(new_files.get(n[0]))
            change = _rebuilt(f"{name} (mapped by the server {server})", name, before, after, n[0], 3.0)
            rebuilt += [Rebuilt(n[0], name, before, after, change)] if change else []
    changes += grouped(rebuilt, f"mapped by the server {server}", 3.0)
    came, gone = sorted(new.keys() - old.keys()), sorted(old.keys() - new.keys())
    if came or gone:
        parts = ([f"now also maps {fmt.listing(came)}"] if came else []) + (
            [f"no longer maps {fmt.listing(gone)}"] if gone else [])
        changes.append(Change("process", f"{server} mapped libraries", gone or None, came or None, Severity.low,
                              f"the server {server} " + " and ".join(parts)))
    return changes


def _now_maps(server: str, name: str, old: list[str], new: list[str], old_files: Facts, new_files: Facts) -> Change:
    if len(old) == 1 and new == [old[0] + DELETED]:
        entry = as_dict(new_files.get(new[0]))
        text = (f"the server {server} still runs the {name} that was deleted or replaced on disk after it "
                f"started ({fmt.value(old[0])}): it runs the old build{_build(entry)} until it restarts")
        return Change(file_category(name), f"{name} ({server})", old, new, Severity.high, text, magnitude=3.0,
                      part_of=owned_by(entry))
    was = ", ".join(_copy(path, as_dict(old_files.get(path))) for path in old) or "nothing"
    now = ", ".join(_copy(path, as_dict(new_files.get(path)), full=True) for path in new)
    several = " (two copies in one process)" if len(new) > 1 else ""
    text = f"the server {server} now maps {now}{several} instead of {was}"
    return Change(file_category(name), f"{name} ({server})", old, new, Severity.high, text, magnitude=3.0,
                  part_of=owned_by(*(as_dict(new_files.get(path)) for path in new)))


def _copy(path: str, entry: Facts, full: bool = False) -> str:
    """``the wheel's copy (nvidia-nccl-cu12 2.28.9, build-id a7f4…)`` or the path."""
    owners = as_dict(entry.get("owners"))
    version = display_version(entry)
    detail = ", ".join(part for part in (
        " ".join(f"{name} {ver}" for name, ver in sorted(owners.items())) if owners else version,
        f"build-id {fmt.short(entry.get('build_id'), 8)}…" if entry.get("build_id") else None) if part)
    if owners and not full:
        return f"the wheel's copy ({detail})" if detail else "the wheel's copy"
    return f"{path} ({detail})" if detail else path


# ---- what the loader resolves ----------------------------------------------------------


def diff_resolution(old: Facts, new: Facts, old_files: Facts, new_files: Facts) -> list[Change]:
    """Per interpreter, each library name its wheels ship whose copy the loader would pick
    moved: to another copy (a toolkit on LD_LIBRARY_PATH, a directory ld.so.conf added), or
    back to the wheel's."""
    changes: list[Change] = []
    if old.get("error") or new.get("error"):
        return changes
    old_ctx, new_ctx = as_dict(old.get("interpreters")), as_dict(new.get("interpreters"))
    for interp in sorted(old_ctx.keys() & new_ctx.keys()):
        o, n = as_dict(old_ctx[interp]), as_dict(new_ctx[interp])
        if o.get("error") or n.get("error"):
            if o.get("error") != n.get("error"):
                text = (f"what the loader resolves for {interp} is unknown: {fmt.value(n.get('error'))}" if n.get("error")
                        else f"what the loader resolves for {interp} is known again")
                changes.append(Change("file", f"(loader, {interp})", o.get("error"), n.get("error"), Severity.low, text))
            continue
        before, after = as_dict(o.get("libraries")), as_dict(n.get("libraries"))
        for name in sorted(before.keys() & after.keys()):
            change = _resolved(interp, name, as_dict(before[name]), as_dict(after[name]), old_files, new_files)
            changes += [change] if change else []
    o_errors = as_dict(old.get("ld_so_conf")).get("errors") or []
    n_errors = as_dict(new.get("ld_so_conf")).get("errors") or []
    if o_errors != n_errors and n_errors:
        text = f"/etc/ld.so.conf cannot be read whole: {fmt.listing([fmt.value(e) for e in n_errors])}"
        changes.append(Change("file", "/etc/ld.so.conf", o_errors or None, n_errors, Severity.low, text))
    return changes


def _resolved(interp: str, name: str, old: Facts, new: Facts, old_files: Facts, new_files: Facts) -> Change | None:
    if old.get("path") == new.get("path"):
        return None
    wheel = str(new.get("wheel") or "")
    item = f"{name} ({interp})"
    requester = file_name(str(new.get("needed_by") or "?"))
    was = ("the wheel's copy" + _owned(wheel, old_files) if old.get("path") == wheel
           else _copy(str(old.get("path")), as_dict(old_files.get(old.get("path")))) if old.get("path") else "nothing")
    if new.get("path") == wheel:
        text = f"{name} needed by {requester} ({interp}) resolves to the wheel's copy{_owned(wheel, new_files)} again (was {was})"
        return Change(file_category(name), item, old.get("path"), new.get("path"), Severity.low, text)
    if not new.get("path"):
        text = (f"the loader finds no {name} for {requester} ({interp}) any more (was {was}): "
                f"importing it fails with '{name}: cannot open shared object file'")
        return Change(file_category(name), item, old.get("path"), None, Severity.high, text, magnitude=3.0)
    text = (f"{name} needed by {requester} ({interp}) now resolves to "
            f"{_copy(str(new['path']), as_dict(new_files.get(new['path'])), full=True)} {how_found(new)}, "
            f"not the wheel's copy{_owned(wheel, new_files)} (was {was}){older(new, new_files)}")
    # The report's first line: the library, the step that found the other copy, and where.
    via = f"LD_LIBRARY_PATH ({new.get('dir')})" if new.get("via") == "LD_LIBRARY_PATH" else str(new.get("via") or "the loader")
    short = f"{name} now resolves through {via}, not to the wheel's copy ({interp})"
    return Change(file_category(name), item, old.get("path"), new.get("path"), Severity.high, text, magnitude=3.0,
                  headline=short)


def _owned(path: str, files: Facts) -> str:
    owners = as_dict(as_dict(files.get(path)).get("owners"))
    return f" ({' '.join(f'{n} {v}' for n, v in sorted(owners.items()))})" if owners else ""


# ---- what is installed -----------------------------------------------------------------


def _installed(old: Facts, new: Facts, old_files: Facts, new_files: Facts, mapped: set[str]) -> list[Change]:
    """NCCL/CUDA libraries of the interpreters and libnccl of the system: a rebuild under
    the same path, and paths that came or went. A library a server maps is judged above."""
    changes: list[Change] = []
    for where, o_paths, n_paths in _installed_lists(old, new):
        rebuilt: list[Rebuilt] = []
        for path in sorted(set(o_paths) & set(n_paths) - mapped):
            before, after = as_dict(old_files.get(path)), as_dict(new_files.get(path))
            name = str(after.get("name") or path)
            change = _rebuilt(f"{fmt.value(short_path(path))} ({where})", name, before, after, path, 2.5)
            rebuilt += [Rebuilt(path, name, before, after, change)] if change else []
        changes += grouped(rebuilt, where, 2.5)
        came, gone = sorted(set(n_paths) - set(o_paths)), sorted(set(o_paths) - set(n_paths))
        if came or gone:
            parts = ([f"added {fmt.listing([short_path(p) for p in came])}"] if came else []) + (
                [f"removed {fmt.listing([short_path(p) for p in gone])}"] if gone else [])
            changes.append(Change(file_category(" ".join(came + gone)), f"libraries ({where})", gone or None,
                                  came or None, Severity.low, f"NCCL/CUDA libraries {where}: " + "; ".join(parts)))
    return changes


def _installed_lists(old: Facts, new: Facts) -> list[tuple[str, list[str], list[str]]]:
    lists = [("system", list(old.get("system") or []), list(new.get("system") or []))]
    old_interps, new_interps = as_dict(old.get("interpreters")), as_dict(new.get("interpreters"))
    for name in sorted(old_interps.keys() & new_interps.keys()):
        o, n = as_dict(old_interps[name]), as_dict(new_interps[name])
        if o.get("error") or n.get("error"):
            continue  # unknown is not "uninstalled": integrity says the interpreter failed
        lists.append((f"in {name}", list(o.get("libraries") or []), list(n.get("libraries") or [])))
    return lists


# ---- one library's build ---------------------------------------------------------------


@dataclass(frozen=True)
class Rebuilt:
    path: str
    name: str
    old: Facts
    new: Facts
    change: Change


def grouped(rebuilt: list[Rebuilt], where: str, magnitude: float) -> list[Change]:
    """One line per distribution (or, for files no RECORD lists, per directory) whose
    libraries changed build together: an upgrade of torch rebuilds forty of them at once.
    A library alone in its group keeps its own line, with its evidence."""
    groups: dict[str, list[Rebuilt]] = {}
    for item in rebuilt:
        owner = " and ".join(sorted(as_dict(item.new.get("owners")))) or item.path.rsplit("/", 1)[0]
        groups.setdefault(owner, []).append(item)
    changes = []
    for owner, items in groups.items():
        if len(items) == 1:
            changes.append(items[0].change)
            continue
        names = fmt.listing([item.name for item in items])
        if as_dict(items[0].new.get("owners")):
            was, now = display_version(items[0].old), display_version(items[0].new)
            versions = f"same version {now}" if was == now else f"{was} → {now}"
            text = f"{len(items)} libraries of {owner} {where}: {versions}, different builds ({names})"
        else:
            text = f"{len(items)} libraries in {owner} {where}: different builds ({names})"
        changes.append(Change(items[0].change.category, f"{owner} libraries ({where})", None,
                              [item.name for item in items], Severity.high, text, magnitude=magnitude,
                              part_of=owned_by(*(item.new for item in items))))
    return changes


def _rebuilt(label: str, name: str, old: Facts, new: Facts, path: str, magnitude: float) -> Change | None:
    """Same path, another build: the build-id (or, without one, the size) moved."""
    if old.get("error") or new.get("error"):
        if old.get("error") == new.get("error"):
            return None
        text = f"{label} could not be read: {fmt.value(new.get('error'))}" if new.get("error") else (
            f"{label} is readable again (was: {fmt.value(old.get('error'))})")
        return Change("file", path, old.get("error"), new.get("error"), Severity.low, text)
    same_build = old.get("build_id") == new.get("build_id") and (
        old.get("build_id") is not None or old.get("size") == new.get("size"))
    if same_build:
        return None
    was, now = display_version(old), display_version(new)
    versions = f"same version {now}" if was == now else f"{was} → {now}"
    evidence = ", ".join(part for part in (
        f"build-id {_id(old)} → {_id(new)}" if old.get("build_id") or new.get("build_id") else "no build-id",
        f"{fmt.size(old.get('size'))} → {fmt.size(new.get('size'))}" if old.get("size") != new.get("size") else None,
    ) if part)
    text = f"{label}: {versions}, different build ({evidence})"
    return Change(file_category(name), path, _id(old), _id(new), Severity.high, text, magnitude=magnitude,
                  part_of=owned_by(new))


def _id(entry: Facts) -> str:
    build = entry.get("build_id")
    return f"{build[:8]}…" if isinstance(build, str) and len(build) > 8 else str(build or "none")


def _build(entry: Facts) -> str:
    return f" (build-id {_id(entry)})" if entry.get("build_id") else ""


def _unknown(what: str, old: Any, new: Any) -> Change:
    text = (f"the libraries the {what} map could not be read: {fmt.value(new)}" if new
            else f"the libraries the {what} map are readable again (was: {fmt.value(old)})")
    return Change("process", f"({what} libraries)", old, new, Severity.low if new else Severity.info, text)
