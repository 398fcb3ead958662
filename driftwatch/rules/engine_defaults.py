"""Defaults that moved under an unchanged command (``rules/engine_defaults.toml``).

A package release that changes what the same launch does with the same model files: vLLM
0.8 applying the model's generation_config.json, transformers 5 rebuilding a tokenizer from
its declared class. One snapshot shows the state (the version, the model's files, the launch
settings); the diff ties it to the upgrade that produced it, so the package's line names the
behaviour, not only the version.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

from driftwatch.facts.read import Facts, as_dict
from driftwatch.engines import ENGINES, parse_version
from driftwatch.rules.finding import Finding
from driftwatch.facts.names import package_subjects
from driftwatch.rules.host import Host, Missing
from driftwatch.severity import Severity

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib


@dataclass(frozen=True)
class MovedDefault:
    package: str
    since: str
    behaviour: str
    model_file: str
    severity: str
    fix: str
    reference: str
    model_keys: list[str] = field(default_factory=list)
    model_values: dict[str, list[str]] = field(default_factory=dict)
    unless_arg: str | None = None

    def matches(self, values: Facts) -> list[str]:
        """What the model's file sets that makes the behaviour matter ("temperature 0.6")."""
        found = [f"{key} {values[key]}" for key in self.model_keys if values.get(key) is not None]
        found += [f"{key} {values[key]}" for key, allowed in self.model_values.items() if values.get(key) in allowed]
        return found


@lru_cache(maxsize=1)
def moved_defaults() -> tuple[MovedDefault, ...]:
    text = resources.files("driftwatch.rules").joinpath("engine_defaults.toml").read_text(encoding="utf-8")
    return tuple(MovedDefault(**entry) for entry in tomllib.loads(text)["defaults"])


def moved_defaults_rule(host: Host) -> list[Finding]:
    models = as_dict(host.facts("models").get("models"))
    if not models:
        raise Missing("no served or configured model's files were read")
    versions = _versions(host)
    launch = host.launch() if host.has("processes") or host.logs() else {}
    findings = []
    for entry in moved_defaults():
        version = versions.get(entry.package)
        since, parsed = parse_version(entry.since), parse_version(version)
        if since is None or parsed is None or parsed < since or (entry.unless_arg and launch.get(entry.unless_arg)):
            continue
        for model, facts in sorted(models.items()):
            values = as_dict(as_dict(as_dict(as_dict(facts).get("files")).get(entry.model_file)).get("values"))
            matched = entry.matches(values)
            if not matched:
                continue
            label = ENGINES[entry.package].label if entry.package in ENGINES else entry.package
            findings.append(Finding(
                severity=Severity(entry.severity),
                why=f"{label} {version} {entry.behaviour} (since {entry.since}); {model}'s {entry.model_file} "
                    f"sets {', '.join(matched)}",
                fix=entry.fix,
                reference=entry.reference,
                subjects=package_subjects(entry.package),
                key=f"{entry.package}:{model}",
            ))
    return findings


def _versions(host: Host) -> dict[str, Any]:
    try:
        return {name: dist.get("version") for _, name, dist in host.distributions()}
    except Missing:
        return {}
