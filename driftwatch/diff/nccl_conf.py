"""NCCL configuration files (the ``nccl_conf`` probe), diffed like environment variables.

A key NCCL reads from ``/etc/nccl.conf`` is a setting as much as one exported in a shell:
the change is an ``env`` change named by the variable, so ``history --item NCCL_P2P_DISABLE``
finds it wherever it was set. A file edited without a setting changing is context.
"""

from __future__ import annotations

from typing import Any

from driftwatch.facts import fmt
from driftwatch.diff.change import Change, Severity
from driftwatch.diff.context import DiffContext
from driftwatch.facts.read import Facts, as_dict
from driftwatch.diff.generic import changed_keys
from driftwatch.diff.runtime import HIGH_ENV_PREFIXES

KEYS = frozenset({"files", "conf_file_error"})


def diff_nccl_conf(old: Facts, new: Facts, ctx: DiffContext) -> list[Change]:
    old_files, new_files = as_dict(old.get("files")), as_dict(new.get("files"))
    servers = as_dict(ctx.facts_of("processes")[1].get("servers"))
    changes: list[Change] = []
    for path in changed_keys(old_files, new_files):
        changes += _file(path, as_dict(old_files.get(path)), as_dict(new_files.get(path)), servers)
    return changes


def _file(path: str, old: Facts, new: Facts, servers: Facts) -> list[Change]:
    if old.get("error") != new.get("error"):
        error = new.get("error") or old.get("error")
        state = "cannot be read" if new.get("error") else "can be read again, was"
        text = f"{path} {state}: {fmt.value(error)}; its settings are not compared"
        return [Change("env", path, old.get("error"), new.get("error"), Severity.low, text)]
    if old.get("error"):
        return []
    before, after = as_dict(old.get("settings")), as_dict(new.get("settings"))
    changes = [_setting(path, name, before.get(name), after.get(name), servers)
               for name in sorted(before.keys() | after.keys()) if before.get(name) != after.get(name)]
    if not changes and old.get("sha256") != new.get("sha256") and old.get("exists") and new.get("exists"):
        text = f"{path} was edited; the settings NCCL reads from it are the same"
        changes.append(Change("env", path, fmt.short(old.get("sha256"), 12), fmt.short(new.get("sha256"), 12),
                              Severity.info, text, context=True))
    return changes


def _setting(path: str, name: str, old: Any, new: Any, servers: Facts) -> Change:
    if old is None:
        text = f"{name}={fmt.value(new)} set in {path} (was not set)"
    elif new is None:
        text = f"{name} (was {fmt.value(old)}) no longer set in {path}"
    else:
        text = f"{name} {fmt.value(old)} → {fmt.value(new)} in {path}"
    severity = Severity.high if name.startswith(HIGH_ENV_PREFIXES) else Severity.medium
    if name != name.strip():
        text += f": the name has spaces, so NCCL sets {name!r}, a variable nothing reads"
        severity = Severity.low
    elif servers and all(name in as_dict(as_dict(s).get("env")) for s in servers.values()):
        text += ": every running server's environment sets it, which wins over the file"
        severity = Severity.low
    return Change("env", name, old, new, severity, text)
