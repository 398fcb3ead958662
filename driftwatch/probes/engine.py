"""The ``engine`` probe: which serving engine each interpreter runs, and whether its source
still names the engine settings that are set.

A variable the installed engine never names is one it cannot read: ``VLLM_ATTENTION_BACKEND``
after vLLM 0.15 is set and silently ignored (vllm-project/vllm#50292, found just so: a grep of
the installed package). For each engine (``driftwatch.engines``) installed in the interpreter a
server runs (its argv's python, or the python beside its console script) or a configured one,
``scripts/engine_collect.py`` records the version and, for every engine variable a running
server's or the login shell's environment sets (and every one the data file says a release
retired), whether the package's ``*.py`` files name it. Bounded in files, bytes and time; a
name not reached is ``null`` (unknown), never ``false``. The previous snapshot is the cache:
with the same RECORD digest, names already judged are not looked for again.
"""

from __future__ import annotations

import base64
import json
import posixpath
from typing import Any

from driftwatch.engines import ENGINES, MAX_NAMES, engine_of, retired_settings
from driftwatch.probes.base import Facts, ProbeContext, ProbeError, ProbeSkipped, collector_script
from driftwatch.probes.processes import environments, observed
from driftwatch.probes.python import extract_report, interpreter_reports, run_interpreters

MAX_INTERPRETERS = 4
MAX_FILES = 20_000
MAX_BYTES = 256 * 1024 * 1024


def settings_set(facts: Facts) -> dict[str, list[str]]:
    """Engine variable → the environments that set it ("server vllm serve", "login env")."""
    found: dict[str, list[str]] = {}
    for where, env in environments(facts):
        for name, value in sorted(env.items()):
            if engine_of(name) and value not in (None, ""):
                found.setdefault(name, []).append(where)
    return found


def server_pythons(facts: Facts) -> list[str]:
    """The interpreters the running servers run: argv[0] when it is a python, else the python
    beside a console script (``/venv/bin/vllm`` → ``/venv/bin/python``)."""
    found = []
    for server in (facts.get("servers") or {}).values():
        argv = (server or {}).get("argv") or []
        first = str(argv[0]) if argv else ""
        if not first.startswith("/"):
            continue
        base = posixpath.basename(first)
        found.append(first if base.startswith("python") else posixpath.join(posixpath.dirname(first), "python"))
    return found


def engines_in_configured(ctx: ProbeContext) -> list[str]:
    """Configured interpreters whose distributions (the python probe's run) hold an engine."""
    found = []
    for name, outcome in interpreter_reports(ctx).items():
        if isinstance(outcome, ProbeError):
            continue
        try:
            dists = extract_report(outcome.text).get("distributions") or {}
        except ProbeError:
            continue
        if any(engine in dists for engine in ENGINES):
            found.append(name)
    return found


def build_request(names: dict[str, list[str]], previous: dict[str, Any], seconds: float) -> dict[str, Any]:
    wanted: dict[str, list[str]] = {key: [] for key in ENGINES}
    for engine, name in retired_settings():
        wanted[engine].append(name)
    for name in names:
        engine = engine_of(name)
        if engine and name not in wanted[engine]:
            wanted[engine].append(name)
    return {
        "engines": {key: {"package": ENGINES[key].package, "names": sorted(wanted[key])[:MAX_NAMES]} for key in ENGINES},
        "previous": previous, "seconds": seconds, "max_files": MAX_FILES, "max_bytes": MAX_BYTES,
    }


def merge_reports(order: list[str], reports: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str | None]]:
    """Per engine, the first interpreter's (in ``order``) report of it; and each run's outcome."""
    engines: dict[str, Any] = {}
    outcomes: dict[str, str | None] = {}
    for interpreter in order:
        outcome = reports.get(interpreter)
        if isinstance(outcome, ProbeError):
            outcomes[interpreter] = str(outcome)
            continue
        try:
            report = extract_report(outcome.text) if outcome is not None else {}
        except ProbeError as exc:
            outcomes[interpreter] = str(exc)
            continue
        outcomes[interpreter] = None
        for key, engine in (report.get("engines") or {}).items():
            if key in ENGINES and isinstance(engine, dict) and key not in engines:
                engines[key] = {"interpreter": interpreter, **engine}
    return engines, outcomes


def nothing_found(names: dict[str, list[str]], unread: ProbeError | ProbeSkipped | None) -> Facts:
    """No engine in any interpreter read: a fact only when the servers were read too; with
    their environments unread the probe knows nothing, and ends as the processes probe did."""
    if unread is not None:
        raise type(unread)(f"environments not read: {unread}")
    return {"engines": {}, "settings": names, "interpreters": {}, "environments_error": None}


class EngineProbe:
    name = "engine"

    def collect(self, ctx: ProbeContext) -> Facts:
        unread: ProbeError | ProbeSkipped | None = None
        try:
            processes = observed(ctx)
        except (ProbeError, ProbeSkipped) as exc:  # the configured interpreters still tell
            processes, unread = {}, exc
        environments_error = None if unread is None else f"environments not read: {unread}"
        names = settings_set(processes)
        servers = server_pythons(processes)
        # Every candidate is asked at once, while the python probe reads the configured
        # interpreters' distributions (which say whether one holds an engine at all): on a host
        # whose interpreters start slowly (a venv on NFS) the probe costs one start, not two.
        # The runs of configured interpreters without an engine are then dropped.
        guess = list(dict.fromkeys(servers + list(ctx.watch.python)))[:MAX_INTERPRETERS]
        if not guess:
            return nothing_found(names, unread)
        previous = {key: engine for key, engine in (ctx.previous.get("engines") or {}).items()
                    if isinstance(engine, dict) and engine.get("interpreter") in guess}
        request = build_request(names, previous, max(0.5, ctx.time_left * 0.5))
        encoded = base64.b64encode(json.dumps(request).encode()).decode()
        script = collector_script("engine_collect.py").replace("\nmain()\n", f"\nREQUEST = {encoded!r}\nmain()\n")
        reports = run_interpreters(ctx, guess, script)
        order = list(dict.fromkeys(servers + engines_in_configured(ctx)))[:MAX_INTERPRETERS]
        if not order:
            return nothing_found(names, unread)
        late = [interpreter for interpreter in order if interpreter not in reports]  # past the guess's bound
        if late:
            reports.update(run_interpreters(ctx, late, script))
        engines, outcomes = merge_reports(order, reports)
        return {"engines": engines, "settings": names, "interpreters": outcomes, "environments_error": environments_error}
