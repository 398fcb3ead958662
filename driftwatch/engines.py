"""The serving engines driftwatch knows, and the settings their releases stopped reading.

Neutral data for the ``engine`` probe (which names to look for in an engine's source), the
diff and the rules: each engine's distribution, its top-level package and the prefixes of its
environment variables; and ``rules/engine_settings.toml``, each entry checked against its
public record (a release note, a PR, an issue).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from typing import Any

from packaging.version import InvalidVersion, Version

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib


@dataclass(frozen=True)
class Engine:
    distribution: str  # PEP 503 name
    package: str  # the top-level import package
    label: str  # as people write it
    prefixes: tuple[str, ...]  # its environment variables


ENGINES: dict[str, Engine] = {
    "vllm": Engine("vllm", "vllm", "vLLM", ("VLLM_",)),
    "sglang": Engine("sglang", "sglang", "SGLang", ("SGLANG_", "SGL_")),
}
MAX_NAMES = 256  # settings looked for per engine


@dataclass(frozen=True)
class RetiredSetting:
    engine: str
    name: str
    removed: str
    replacement: str
    instead: str
    reference: str
    deprecated: str | None = None

    def read_by(self, version: str | None) -> bool | None:
        """Whether ``version`` of the engine still reads the setting; None when unknown."""
        parsed = parse_version(version)
        return None if parsed is None else parsed < Version(self.removed)


@lru_cache(maxsize=1)
def retired_settings() -> dict[tuple[str, str], RetiredSetting]:
    """(engine, variable) → the release that stopped reading it, from the shipped data file."""
    text = resources.files("driftwatch.rules").joinpath("engine_settings.toml").read_text(encoding="utf-8")
    entries = (RetiredSetting(**entry) for entry in tomllib.loads(text)["settings"])
    return {(entry.engine, entry.name): entry for entry in entries}


def engine_of(name: str) -> str | None:
    """The engine whose variable ``name`` is (by its prefix), or None."""
    return next((key for key, engine in ENGINES.items() if name.startswith(engine.prefixes)), None)


def parse_version(version: str | None) -> Version | None:
    if not isinstance(version, str):
        return None
    try:
        return Version(version)
    except InvalidVersion:
        return None


def read_by(engine: str, facts: dict[str, Any], name: str) -> tuple[bool | None, str]:
    """(whether the installed engine reads ``name``, why we know): its source never naming it
    is certain; a release that removed it says so; else unknown or read."""
    named = _dict(facts.get("names")).get(name)
    retired = retired_settings().get((engine, name))
    version = facts.get("version")
    if named is False:
        return False, "its source never names it"
    if retired is not None and retired.read_by(version) is False:
        return False, f"{ENGINES[engine].label} {retired.removed} removed it"
    return (True, "") if named is True or (retired is not None and retired.read_by(version)) else (None, "")


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
