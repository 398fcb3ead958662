"""The ``python`` probe: every distribution each configured interpreter can see.

Each interpreter is started once as ``<python> -`` with a stdlib-only collector script on
stdin (``scripts/dists.py`` + ``scripts/python_collect.py``); only the quoted interpreter
path enters the shell. The collector reads the ``*.dist-info`` / ``*.egg-info`` files on
the interpreter's ``sys.path`` as ``importlib.metadata`` would find them, and never imports
a package, so a broken or slow-to-import torch cannot hang or crash the probe. URLs pip
recorded (``direct_url.json``, ``name @ URL`` requirements) lose their credentials here.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from driftwatch.probes.base import Facts, ProbeContext, ProbeError, ProbeTimeout, collector_script
from driftwatch.redact import redact_value
from driftwatch.transport import CommandResult, quote_path

REPORT_MARKER = "driftwatch-python-report:"  # must match MARKER in scripts/dists.py
_DIST_FIELDS = (
    "name",
    "version",
    "installed_at",
    "installer",
    "editable",
    "direct_url",
    "source_commit",
    "record_sha256",
    "requires",
    "location",
)




def run_interpreters(ctx: ProbeContext, interpreters: list[str], script: str) -> dict[str, CommandResult | ProbeError]:
    """Run ``script`` in every interpreter (concurrently), each within the probe deadline.

    An interpreter that is missing, crashes or times out yields its ProbeError instead
    of a result, so the caller can record it and still describe the others.
    """
    names = list(dict.fromkeys(interpreters))  # the same interpreter twice runs once
    stdin = script.encode("utf-8")

    def one(interpreter: str) -> CommandResult | ProbeError:
        try:
            result = ctx.run(f"exec {quote_path(interpreter)} -", stdin=stdin)
        except ProbeError as exc:  # includes ProbeTimeout
            return exc
        if result.exit_code != 0:
            last = result.error_text.splitlines()[-1:]
            detail = f": {last[0]}" if last else ""
            return ProbeError(f"exit {result.exit_code}{detail}")
        return result

    if len(names) <= 1:
        return {name: one(name) for name in names}
    # The SSH transport opens at most 8 channels at once (sshd's MaxSessions is 10); more
    # threads than that would only queue.
    with ThreadPoolExecutor(max_workers=min(len(names), 8)) as pool:
        return dict(zip(names, pool.map(one, names), strict=True))


def extract_report(text: str) -> dict[str, Any]:
    """The JSON object a collector printed after its marker (last marker line wins)."""
    for line in reversed(text.splitlines()):
        if line.startswith(REPORT_MARKER):
            try:
                data = json.loads(line[len(REPORT_MARKER) :])
            except ValueError as exc:
                raise ProbeError(f"unreadable collector output: {exc}") from None
            if not isinstance(data, dict):
                raise ProbeError("collector output is not a JSON object")
            return data
    raise ProbeError("collector printed no report")


def parse_python_report(text: str) -> dict[str, Any]:
    """One interpreter's entry of the facts from the collector's stdout."""
    return python_entry(extract_report(text))


def python_entry(data: dict[str, Any]) -> dict[str, Any]:
    """One interpreter's entry of the facts from the collector's report (also the report
    the containers probe gets for a container's interpreter)."""
    raw = data.get("distributions")
    if not isinstance(raw, dict):
        raise ProbeError("collector report has no distributions")
    distributions = {
        key: {field: dist.get(field) for field in _DIST_FIELDS}
        for key, dist in sorted(raw.items())
        if isinstance(dist, dict)
    }
    for dist in distributions.values():
        dist["editable"] = bool(dist["editable"])
        # A VCS or index URL pip recorded may carry credentials (git+https://user:token@...),
        # in direct_url.json and in PEP 508 "name @ URL" requirements alike.
        dist["requires"] = [redact_value(str(r)) for r in dist["requires"] or []]
        if isinstance(dist["direct_url"], str):
            dist["direct_url"] = redact_value(dist["direct_url"])
    return {
        "executable": data.get("executable"),
        "version": data.get("version"),
        "prefix": data.get("prefix"),
        "error": None,
        "distributions": distributions,
        "resolution": resolution_facts(data.get("resolution")),
    }


def resolution_facts(raw: Any) -> dict[str, Any]:
    """How the interpreter resolves imports (docs/facts.md); the code a .pth file runs and
    PYTHONPATH may carry credentials, redacted like every other value."""
    if not isinstance(raw, dict):
        return {"error": "the collector did not report how imports resolve"}
    pth = {str(path): {"imports": None if entry.get("imports") is None else
                       [redact_value(str(line)) for line in entry["imports"]], "error": entry.get("error")}
           for path, entry in sorted((raw.get("pth") or {}).items()) if isinstance(entry, dict)}
    return {
        "error": None,
        "pythonpath": redact_value(raw["pythonpath"]) if isinstance(raw.get("pythonpath"), str) else None,
        "user_site": raw.get("user_site"),
        "user_bin": raw.get("user_bin"),
        "venv": raw.get("venv"),
        "pth": pth,
        "shadowed": dict(sorted((raw.get("shadowed") or {}).items())),
        "imports": dict(sorted((raw.get("imports") or {}).items())),
    }


def _entry(outcome: CommandResult | ProbeError) -> dict[str, Any]:
    if isinstance(outcome, ProbeError):
        return {"error": str(outcome)}
    if outcome.truncated:
        return {"error": "collector output exceeded the output bound"}
    try:
        return parse_python_report(outcome.text)
    except ProbeError as exc:
        return {"error": str(exc)}


def interpreter_reports(ctx: ProbeContext) -> dict[str, CommandResult | ProbeError]:
    """Every configured interpreter's run of ``python_collect.py``: once per snapshot,
    shared by the python and cuda probes (each start of a GPU venv's python costs the
    host ~25 ms of CPU)."""
    interpreters = list(ctx.watch.python)
    return ctx.shared.once(
        ("python_collect", tuple(interpreters)),
        lambda: run_interpreters(ctx, interpreters, collector_script("python_collect.py")),
    )


class PythonProbe:
    name = "python"

    def collect(self, ctx: ProbeContext) -> Facts:
        outcomes = interpreter_reports(ctx)
        interpreters = {name: _entry(outcome) for name, outcome in outcomes.items()}
        if interpreters and all(entry.get("error") for entry in interpreters.values()):
            summary = "; ".join(f"{name}: {e['error']}" for name, e in interpreters.items())
            if all(isinstance(o, ProbeTimeout) for o in outcomes.values()):
                raise ProbeTimeout(summary)
            raise ProbeError(f"no interpreter could be read: {summary}")
        return {"interpreters": interpreters}
