"""Engine settings nothing reads: a variable set for a serving engine whose installed version
no longer reads it (its source never names it, or the release notes say it was removed).
The server starts, and silently runs what the variable was meant to replace."""

from __future__ import annotations

import re
from typing import Any

from driftwatch.facts.read import as_dict
from driftwatch.engines import ENGINES, engine_of, read_by, retired_settings
from driftwatch.rules.finding import Finding
from driftwatch.rules.host import Host
from driftwatch.severity import Severity

NEVER_NAMED = "https://github.com/vllm-project/vllm/issues/50292"


def value_of(host: Host, name: str) -> Any:
    for source in host.sources():
        if name in source.values:
            return source.values[name]
    return None


def logged_backend(host: Host, engine: str, name: str) -> str | None:
    """The attention backend the engine's log says it chose, when ``name`` picks one."""
    if "ATTENTION_BACKEND" not in name:
        return None
    return next((str(log["attention_backend"]) for log in host.logs()
                 if log.get("kind") == engine and log.get("attention_backend")), None)


def _norm(text: Any) -> str:
    return re.sub(r"[^A-Z0-9]", "", str(text).upper())


def ignored_settings(host: Host) -> list[Finding]:
    facts = host.facts("engine")
    engines, settings = as_dict(facts.get("engines")), as_dict(facts.get("settings"))
    findings = []
    for name, where in sorted(settings.items()):
        engine = engine_of(name)
        installed = as_dict(engines.get(engine)) if engine else {}
        if not installed or installed.get("error"):
            continue
        read, why = read_by(str(engine), installed, name)
        if read is not False:
            continue
        label, version = ENGINES[str(engine)].label, installed.get("version")
        retired = retired_settings().get((str(engine), name))
        value = value_of(host, name)
        backend = logged_backend(host, str(engine), name)
        shown = backend is not None and value is not None and _norm(value) not in _norm(backend)
        instead = retired.instead if retired else "its own default applies"
        findings.append(Finding(
            severity=Severity.medium,
            why=f"{name}={value} is set ({', '.join(map(str, where))}) but {label} {version} does not read it "
                f"({why}): {instead}" + (f"; its log shows the {backend} backend" if shown else ""),
            fix=(f"use {retired.replacement} instead, and unset {name}" if retired
                 else f"find what replaces {name} in {label} {version}'s documentation, and unset it"),
            reference=retired.reference if retired else NEVER_NAMED,
            subjects=(("env", name), ("package", str(engine))),
            key=name,
            observed=shown,
            restates=(("env", name),),
        ))
    return findings
