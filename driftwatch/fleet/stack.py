"""Fleet facts of the loaded stack: compile caches, NCCL configuration files, model files.

Caches are built on each host at its own time: their sizes, times and digests differ by
nature, so only which named entries exist is compared (a host whose FlashInfer cache holds
another version). A setting in an NCCL configuration file is compared like an environment
variable; a model by its hub revision and the content of each file that changes behaviour.
"""

from __future__ import annotations

from typing import Any

from driftwatch.diff.change import Severity
from driftwatch.facts.read import as_dict
from driftwatch.fleet.facts import Area, Fact, FactMap, HostView, freeze


def caches_facts(facts: dict[str, Any], view: HostView) -> tuple[FactMap, frozenset[str]]:
    out: FactMap = {}
    for key, cache in as_dict(facts.get("caches")).items():
        c = as_dict(cache)
        named = tuple(sorted(name for name in as_dict(c.get("entries")) if name != "*"))
        value = f"error: {c['error']}" if c.get("error") else named
        out[f"cache[{key}]"] = Fact("caches", "file", key, f"{key} entries", value, Severity.low)
    return out, frozenset({"caches", "locations_error"})


def nccl_conf_facts(facts: dict[str, Any], view: HostView) -> tuple[FactMap, frozenset[str]]:
    out: FactMap = {}
    for path, entry in as_dict(facts.get("files")).items():
        e = as_dict(entry)
        if e.get("error"):
            out[f"nccl_conf[{path}]"] = Fact("nccl_conf", "env", path, path, f"error: {e['error']}", Severity.low)
        for name, value in as_dict(e.get("settings")).items():
            out[f"nccl_conf[{path}][{name}]"] = Fact("nccl_conf", "env", name, f"{name} ({path})", freeze(value),
                                                    Severity.high)
    return out, frozenset({"files", "conf_file_error"})


def models_facts(facts: dict[str, Any], view: HostView) -> tuple[FactMap, frozenset[str]]:
    out: FactMap = {}
    for key, model in as_dict(facts.get("models")).items():
        m, base = as_dict(model), f"model[{key}]"
        state = f"error: {m['error']}" if m.get("error") else ("present" if m.get("exists") else "missing")
        out[base] = Fact("models", "file", key, f"model {key}", state, Severity.high)
        if m.get("revision"):
            out[f"{base}.revision"] = Fact("models", "file", key, f"{key} revision", m["revision"], Severity.medium,
                                           within=base)
        for rel, entry in as_dict(m.get("files")).items():
            e = as_dict(entry)
            content = e.get("blob") or e.get("sha256") or f"error: {e.get('error')}"
            out[f"{base}.files[{rel}]"] = Fact("models", "file", f"{key}/{rel}", f"{key} {rel}", content,
                                               Severity.high, within=base, why=" (content differs)")
        weights = {rel: as_dict(w).get("blob") or as_dict(w).get("size") for rel, w in as_dict(m.get("weights")).items()}
        out[f"{base}.weights"] = Fact("models", "file", key, f"{key} weights", freeze(weights), Severity.high,
                                      within=base)
    return out, frozenset({"models", "servers_error"})


STACK_AREAS: dict[str, Area] = {
    "caches": caches_facts,
    "nccl_conf": nccl_conf_facts,
    "models": models_facts,
}
