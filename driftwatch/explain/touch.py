"""What the server touches: a change it never touches is not where its failure comes from.

Strider's first heuristic, done with facts: a package the server imports is in its engine's
requirement closure (sglang or vllm, each ``Requires-Dist`` followed, extras included), or
owns a library a server maps. A package change outside both, on a host where an engine's
distribution was read, is *untouched*: ranked below the changes the server can feel. With no
engine read there is no knowledge, and nothing is called untouched.
"""

from __future__ import annotations

from functools import lru_cache

from packaging.requirements import InvalidRequirement, Requirement

from driftwatch.diff.change import Change
from driftwatch.facts.read import Facts, as_dict, normalize_name, ok_facts
from driftwatch.model import Snapshot

ENGINES = ("sglang", "vllm", "tensorrt-llm", "lmdeploy")


def touched_packages(snapshot: Snapshot) -> frozenset[str] | None:
    """Normalized names of the distributions the servers can import or map; None when unknown."""
    found: set[str] = set()
    known = False
    for interp in as_dict(ok_facts(snapshot, "python").get("interpreters")).values():
        dists = {normalize_name(str(k)): as_dict(v) for k, v in as_dict(as_dict(interp).get("distributions")).items()}
        roots = [name for name in ENGINES if name in dists]
        known |= bool(roots)
        found |= _closure(roots, dists)
    libraries = ok_facts(snapshot, "libraries")
    files = as_dict(libraries.get("files"))
    for libs in as_dict(libraries.get("servers")).values():
        for paths in as_dict(libs).values():
            for path in paths if isinstance(paths, list) else []:
                found |= {normalize_name(str(owner)) for owner in as_dict(as_dict(files.get(path)).get("owners"))}
    return frozenset(found) if known else None


def untouched(change: Change, touched: frozenset[str] | None) -> bool:
    """A package change the server provably never touches. Never a focus package (the user
    said it matters: engines import many optionally, undeclared) nor one newly installed (an
    optional import starts working: vLLM picks flashinfer once it is there)."""
    if touched is None or change.category != "package" or change.focus or change.old is None:
        return False
    return normalize_name(str(change.item)) not in touched


def _closure(roots: list[str], dists: dict[str, Facts]) -> set[str]:
    seen: set[str] = set()
    stack = list(roots)
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        requires = dists.get(name, {}).get("requires")
        for text in requires if isinstance(requires, list) else []:
            dependency = _name(text) if isinstance(text, str) else None
            if dependency and dependency in dists and dependency not in seen:
                stack.append(dependency)
    return seen


@lru_cache(maxsize=65536)
def _name(text: str) -> str | None:
    try:
        return normalize_name(Requirement(text).name)
    except (InvalidRequirement, ValueError):
        return None
