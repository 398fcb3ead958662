"""The ``canary`` probe (opt-in): does each watched server still give the same answers?

For each running server the processes probe found (or the ``[canary] url``/``--url``), the
endpoint is its ``--host``/``--port`` as seen from the target: ``scripts/canary_collect.py``
runs there and asks ``127.0.0.1:PORT`` (the server's own ``--host`` when it binds one
address), so the collector never needs to reach the port. It asks ``/health`` and
``/v1/models`` first and sends no prompt to a server that is down, still loading (503),
refusing the key, or not an OpenAI API; then each prompt ``repeats`` times, greedy with every
sampling parameter explicit (``canary/prompts.py``). Bounded on the target (connect and
per-request deadlines, the whole canary's deadline, a size cap per body) and here (the
probe's own deadline is the canary's plus a margin).

The API key is read here from the environment variable ``[canary] api_key_env`` names and
sent to the script on stdin; it is scrubbed from every string the answers bring back.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlsplit

from driftwatch.canary import parse, prompts
from driftwatch.canary.settings import CanarySettings
from driftwatch.probes.base import Facts, ProbeContext, ProbeError, ProbeSkipped, ProbeTimeout, collect_json
from driftwatch.probes.processes import observed
from driftwatch.redact import REDACTED

# Where each engine listens when its command line gives no --port.
DEFAULT_PORTS = {"sglang": 30000, "vllm": 8000, "llama.cpp": 8000}
_ANY_ADDRESS = {None, "", "0.0.0.0", "::", "[::]", "localhost"}
SCRIPT_MARGIN_S = 2.0  # the probe's deadline past the canary's: the script's start and report


def server_engine(server: dict[str, Any]) -> str | None:
    """The engine by the command line: SGLang, vLLM, or llama-cpp-python's server."""
    if server.get("kind") in ("sglang", "vllm"):
        return str(server["kind"])
    argv = [str(word) for word in server.get("argv") or []]
    if "llama_cpp.server" in argv or any(w.endswith(("llama-server", "llama_cpp/server/__main__.py")) for w in argv):
        return "llama.cpp"
    return None


def _last(value: Any) -> Any:
    return value[-1] if isinstance(value, list) and value else value


def server_endpoint(key: str, server: dict[str, Any]) -> dict[str, Any]:
    """Where ``server`` answers, as seen from its host, or an ``error`` saying why unknown."""
    args = server.get("args") or {}
    engine = server_engine(server)
    port = _last(args.get("port"))
    if port is None:
        port = DEFAULT_PORTS.get(engine or "")
    if isinstance(port, str) and port.isdigit():
        port = int(port)
    if not isinstance(port, int) or not 0 < port < 65536:
        return {"key": key, "error": "no --port in its command line and no default port known for it: set "
                                     "[canary] url or give --url", "engine": engine}
    host = _last(args.get("host"))
    host = "127.0.0.1" if host in _ANY_ADDRESS or not isinstance(host, str) else host.strip("[]")
    scheme = "https" if args.get("ssl_certfile") else "http"
    return {"key": key, "scheme": scheme, "host": host, "port": port, "engine": engine, "source": "command line",
            "needs_key": "api_key" in args}


def url_endpoint(url: str, servers: dict[str, dict[str, Any]], source: str) -> dict[str, Any]:
    """An endpoint from a URL; keyed like the watched server on that port, if one is."""
    parts = urlsplit(url if "://" in url else f"http://{url}")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:
        raise ProbeError(f"{source} {url!r}: {exc}") from exc
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ProbeError(f"{source} {url!r}: give http://HOST:PORT as the target sees it, e.g. http://127.0.0.1:30000")
    key, engine = f"{parts.hostname}:{port}", None
    for name, server in servers.items():
        found = server_endpoint(name, server)
        if found.get("port") == port:
            key, engine = name, found.get("engine")
            break
    return {"key": key, "scheme": parts.scheme, "host": parts.hostname, "port": port, "engine": engine,
            "source": source, "needs_key": False}


class CanaryProbe:
    name = "canary"

    def __init__(self, settings: CanarySettings | None = None, url: str | None = None) -> None:
        self.settings = settings or CanarySettings()
        self.url = url  # --url: wins over [canary] url

    def collect(self, ctx: ProbeContext) -> Facts:
        settings = self.settings
        try:
            servers = observed(ctx).get("servers") or {}
        except ProbeSkipped:
            servers = {}
        except ProbeError as exc:  # includes ProbeTimeout
            if not (self.url or settings.url):
                raise ProbeError(f"the running servers could not be read ({exc}): give --url or [canary] url") from exc
            servers = {}
        if self.url or settings.url:
            source = "--url" if self.url else "[canary] url"
            endpoints = [url_endpoint(self.url or settings.url or "", servers, source)]
        else:
            endpoints = [server_endpoint(k, s) for k, s in servers.items()]
        if not endpoints:
            raise ProbeSkipped("no watched server is running and no [canary] url or --url is given")
        key_value, key_problem = _api_key(settings)
        facts: dict[str, Any] = {}
        asked = []
        for endpoint in endpoints:
            if endpoint.get("error"):
                facts[endpoint["key"]] = _failed(endpoint, "error", endpoint["error"], settings)
                continue
            if key_problem:
                facts[endpoint["key"]] = _failed(endpoint, "error", key_problem, settings)
                continue
            loopback = endpoint["host"] in ("127.0.0.1", "::1", "localhost")
            asked.append({**endpoint, "api_key": key_value, "dialect": endpoint.get("engine"), "loopback": loopback})
        if asked:
            facts.update(self._ask(ctx, asked, key_value))
        return {"servers": facts, "settings": prompts.request_settings(settings), "near_tie_gap": settings.near_tie_gap}

    def _ask(self, ctx: ProbeContext, asked: list[dict[str, Any]], key_value: str | None) -> dict[str, Any]:
        settings = self.settings
        # The canary has its own deadline ([canary] deadline, not the per-probe --timeout),
        # cut short by the command's --deadline like every probe's.
        wide = ProbeContext(ctx.transport, ctx.watch, timeout=settings.deadline + SCRIPT_MARGIN_S,
                            previous=ctx.previous, shared=ctx.shared)
        budget = min(settings.deadline, wide.time_left - SCRIPT_MARGIN_S)
        if budget < 1.0:
            raise ProbeTimeout(f"not run: {round(max(budget, 0.0), 1):g}s left for the canary")
        request = prompts.script_request(settings, asked, budget)
        report = collect_json(wide, "canary_collect.py", request, what="canary", keys=("endpoints",))
        out = {}
        for endpoint in asked:
            raw = report["endpoints"].get(endpoint["key"]) or {}
            out[endpoint["key"]] = scrub(endpoint_facts(endpoint, raw, settings), key_value)
        return out


def _api_key(settings: CanarySettings) -> tuple[str | None, str | None]:
    if settings.api_key_env is None:
        return None, None
    value = os.environ.get(settings.api_key_env)
    if not value:
        return None, f"[canary] api_key_env names {settings.api_key_env}, which is not set where driftwatch runs"
    return value, None


def _failed(endpoint: dict[str, Any], state: str, error: str, settings: CanarySettings) -> dict[str, Any]:
    return {
        "url": _url(endpoint), "source": endpoint.get("source"), "engine": endpoint.get("engine"),
        "dialect": None, "state": state, "error": error, "model": None,
        "prompts": {}, "settings": prompts.request_settings(settings),
    }


def _url(endpoint: dict[str, Any]) -> str | None:
    if "host" not in endpoint:
        return None
    host = f"[{endpoint['host']}]" if ":" in str(endpoint["host"]) else endpoint["host"]
    return f"{endpoint.get('scheme', 'http')}://{host}:{endpoint['port']}"


def endpoint_facts(endpoint: dict[str, Any], raw: dict[str, Any], settings: CanarySettings) -> dict[str, Any]:
    """One endpoint's facts from the script's raw answers (pure)."""
    state, error = raw.get("state") or "error", raw.get("error")
    if not raw:
        state, error = "error", "the canary script returned nothing for this server"
    if state == "error" and error and error.startswith("connection refused"):
        error += " (is the server still starting, or gone?)"
    if state == "error" and endpoint.get("needs_key") and not endpoint.get("api_key") and "401" in (error or ""):
        error += "; its command line has --api-key"
    facts = _failed(endpoint, state, error or "", settings) | {"error": error}
    facts["dialect"] = raw.get("dialect")
    if state != "ok":
        return facts
    try:
        facts.update(parse.parse_models(parse.document(raw.get("models") or {}, "/v1/models")))
    except parse.AnswerError as exc:
        return facts | {"state": "error", "error": str(exc)}
    info: dict[str, Any] = {}
    for path, answer in (raw.get("info") or {}).items():
        try:
            info |= parse.parse_info(path, parse.document(answer, path))
        except parse.AnswerError:
            continue  # an engine without that endpoint (an older version): not the canary's failure
    facts["server_info"] = info or None
    facts["version"] = info.get("version")
    runs: dict[str, list[dict[str, Any]]] = {}
    for entry in raw.get("runs") or []:
        runs.setdefault(str(entry.get("prompt")), []).append(entry.get("answer") or {})
    facts["prompts"] = {p.name: _prompt(p.name, p.kind, runs.get(p.name, []), settings) for p in settings.prompts}
    fingerprints = {r.get("system_fingerprint") for p in facts["prompts"].values() for r in p["runs"]} - {None}
    facts["system_fingerprint"] = sorted(fingerprints)[0] if len(fingerprints) == 1 else sorted(fingerprints) or None
    if all(p["error"] for p in facts["prompts"].values()):
        first = next(iter(facts["prompts"].values()))["error"]
        facts.update(state="error", error=f"no prompt was answered: {first}")
    return facts


def _prompt(name: str, kind: str, answers: list[dict[str, Any]], settings: CanarySettings) -> dict[str, Any]:
    spec = next(p for p in settings.prompts if p.name == name)
    out: dict[str, Any] = {"kind": kind, "spec_sha256": prompts.prompt_digest(spec, settings), "runs": [],
                           "error": None}
    path = prompts.CHAT_PATH if kind == "chat" else prompts.COMPLETION_PATH
    for answer in answers:
        try:
            run = parse.parse_run(parse.document(answer, f"POST {path}"), kind)
        except parse.AnswerError as exc:
            out["error"] = str(exc)
            break
        run["volatile"] = parse.timing(run, answer.get("elapsed_s"))
        out["runs"].append(run)
    if not answers:
        out["error"] = "not asked: the canary stopped before this prompt (deadline, or the server stopped answering)"
    elif len(out["runs"]) < min(len(answers), settings.repeats) and out["error"] is None:
        out["error"] = "fewer answers than asked"
    if out["error"]:
        out["runs"] = []  # a half-answered prompt is not compared
    return out


def scrub(value: Any, secret: str | None) -> Any:
    """``value`` with every occurrence of the API key replaced (a server may echo a header)."""
    if not secret:
        return value
    if isinstance(value, str):
        return value.replace(secret, REDACTED) if secret in value else value
    if isinstance(value, dict):
        return {k: scrub(v, secret) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub(v, secret) for v in value]
    return value

