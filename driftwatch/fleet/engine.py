"""Fleet facts of the serving engine as installed: its version, and which set variables it reads.

Paths (the interpreter, the dist-info, the package directory) and the RECORD digest are where
and how the engine was installed, which hosts that should be alike may differ in (a venv per
host, a rebuilt wheel): never compared. What the engine is and what it reads of its settings
are.
"""

from __future__ import annotations

from typing import Any

from driftwatch.diff.change import Severity
from driftwatch.facts.read import as_dict
from driftwatch.fleet.facts import Area, Fact, FactMap, HostView, freeze


def engine_facts(facts: dict[str, Any], view: HostView) -> tuple[FactMap, frozenset[str]]:
    out: FactMap = {}
    for engine, entry in sorted(as_dict(facts.get("engines")).items()):
        found = as_dict(entry)
        out[f"engine[{engine}].version"] = Fact("engine", "package", engine, f"{engine} (as the engine probe reads it)",
                                                freeze(found.get("version")), Severity.high)
        for name, read in sorted(as_dict(found.get("names")).items()):
            out[f"engine[{engine}].reads[{name}]"] = Fact(
                "engine", "env", name, f"{engine} reads {name}", freeze(read), Severity.medium)
    return out, frozenset({"engines", "settings", "interpreters", "environments_error"})


ENGINE_AREAS: dict[str, Area] = {"engine": engine_facts}
