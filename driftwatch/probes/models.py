"""The ``models`` probe: the served model's files that change behaviour, and its hub revision.

A hub revision update can change ``generation_config.json``, the tokenizer or the chat
template with every package identical. For each model a running server serves (its
``--model-path``/``--model``, or the model its log's server arguments name) and each entry
of ``[watch] models``, ``scripts/models_collect.py`` records:

* a local directory: sha256 of the small files that change behaviour (``SMALL_FILES``)
  and, for JSON, their top-level values (bounded), so a diff can name the key that
  changed; the name, size and mtime of each weight file, never read;
* a local file (llama.cpp's and vLLM's ``--model x.gguf``): that one weight file, its name,
  size and mtime, never read;
* a hub id: the Hugging Face cache entry as huggingface_hub writes it
  (``<cache>/models--ORG--NAME/{blobs,refs,snapshots}``): the commit ``refs/main`` (or the
  server's ``--revision``) points to, and for each file of that snapshot its blob name,
  which is its content hash, so knowing whether it changed costs no read.

A small file whose stat key (size, mtime, ctime, inode), or hub blob, is the previous
snapshot's is not read again; ``volatile`` counts the files read and reused.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from driftwatch.probes.base import Facts, ProbeContext, ProbeError, ProbeSkipped, collect_json
from driftwatch.probes.locations import DEFAULT_HF_HUB, HF_HUB_ENV, relocated
from driftwatch.probes.logs import log_facts
from driftwatch.probes.processes import observed
from driftwatch.redact import redact_value

SMALL_FILES = (
    "config.json", "generation_config.json", "tokenizer*.json", "special_tokens_map.json", "chat_template.json",
    "*.jinja", "*.model", "added_tokens.json", "preprocessor_config.json", "processor_config.json",
    "hf_quant_config.json", "*.tiktoken", "vocab.json", "merges.txt", "*.index.json",
)
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".ckpt", ".h5", ".msgpack", ".onnx")
MAX_SMALL_BYTES = 64 * 1024 * 1024  # hashed up to this size
MAX_VALUES_BYTES = 1024 * 1024  # JSON parsed for values up to this size (not a 10 MB tokenizer.json)
MAX_VALUES = 128
MAX_STRING = 160
MAX_FILES = 10_000
MAX_DEPTH = 3
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")


@dataclass
class Model:
    """One model to describe, and where it was seen."""

    key: str  # as served or configured: "Qwen/Qwen3-8B", "/models/llama"
    kind: str  # "local", "hub", or "auto" (a server's bare name: its cwd decides)
    sources: list[str] = field(default_factory=list)
    cwd: str | None = None
    hub_cache: str = DEFAULT_HF_HUB
    revision: str | None = None

    def request(self) -> dict[str, Any]:
        return {"key": self.key, "kind": self.kind, "path": self.key, "repo": self.key, "cwd": self.cwd,
                "cache": self.hub_cache, "revision": self.revision}


def hub_cache(*envs: dict[str, str] | None) -> str:
    """The hub cache huggingface_hub uses under the first of ``envs`` that is known."""
    for env in envs:
        if env is not None:
            found = relocated(HF_HUB_ENV, env)
            return found[1] if found else DEFAULT_HF_HUB
    return DEFAULT_HF_HUB


def classify(model: str, served: bool) -> str | None:
    if model.startswith(("/", "~")):
        return "local"
    if model.startswith("."):
        return "auto" if served else None  # relative to the server's working directory
    if _HUB_ID.match(model):
        # A server resolves a bare name against its working directory before the hub.
        return "auto" if served else "hub"
    return None


def wanted_models(ctx: ProbeContext) -> tuple[dict[str, Model], str | None]:
    """Served and configured models by key, and why the served ones could not be known."""
    models: dict[str, Model] = {}
    error = None
    try:
        seen = observed(ctx)
    except (ProbeError, ProbeSkipped) as exc:
        seen, error = {}, f"servers not read: {exc}"
    login_env = seen.get("login_env")
    for name, server in (seen.get("servers") or {}).items():
        model = server.get("model")
        kind = classify(model, served=True) if isinstance(model, str) else None
        if kind:
            revision = (server.get("args") or {}).get("revision")
            found = models.setdefault(model, Model(model, kind, cwd=server.get("cwd"),
                                                   hub_cache=hub_cache(server.get("env"), login_env),
                                                   revision=revision if isinstance(revision, str) else None))
            found.sources.append(f"server {name}")
    for pattern, log in _logs(ctx).items():
        args = (log or {}).get("server_args") or {}
        model = args.get("model_path") or args.get("model")
        kind = classify(model, served=False) if isinstance(model, str) else None
        if kind and isinstance(model, str):
            models.setdefault(model, Model(model, kind, hub_cache=hub_cache(login_env))).sources.append(f"log {pattern}")
    for model in ctx.watch.models:
        kind = classify(model, served=False) or "local"
        models.setdefault(model, Model(model, kind, hub_cache=hub_cache(login_env))).sources.append("config")
    return models, error


def known_from(previous: Facts) -> dict[str, dict[str, Any]]:
    """Per model, per small file: the stat key and blob the previous snapshot read it at."""
    known: dict[str, dict[str, Any]] = {}
    for key, model in (previous.get("models") or {}).items():
        for rel, entry in ((model or {}).get("files") or {}).items():
            if not isinstance(entry, dict) or entry.get("error") or not (entry.get("sha256") or entry.get("blob")):
                continue
            vol = entry.get("volatile") or {}
            stat = [entry.get("size"), vol.get("mtime_ns"), vol.get("ctime_ns"), vol.get("inode")]
            known.setdefault(key, {})[rel] = {"stat": stat, "blob": entry.get("blob")}
    return known


def model_facts(model: Model, raw: dict[str, Any], previous: dict[str, Any]) -> dict[str, Any]:
    """One model's facts from the script's report; reused files are the previous snapshot's."""
    hub = raw.get("kind") == "hub"
    files: dict[str, Any] = {}
    weights: dict[str, Any] = {}
    for rel, entry in sorted((raw.get("files") or {}).items()):
        vol = dict(entry.get("volatile") or {})
        if hub:  # a blob's mtime is when it was downloaded; its name is its content
            vol["mtime"] = entry.get("mtime")
        base = {"size": entry.get("size"), "mtime": None if hub else entry.get("mtime"), "blob": entry.get("blob"),
                "error": entry.get("error")}
        if entry.get("kind") == "dir":  # a subdirectory that could not be listed
            files[rel] = {"error": entry.get("error")}
            continue
        if entry.get("kind") == "weight":
            weights[rel] = {**base, "volatile": vol}
            continue
        if entry.pop("reused", False):
            before = (previous.get("files") or {}).get(rel) or {}
            entry = {**entry, "sha256": before.get("sha256"), "values": before.get("values")}
        values = entry.get("values")
        if isinstance(values, dict):  # a config is no place for a token, but text from a host is data
            values = {k: redact_value(v) if isinstance(v, str) else v for k, v in values.items()}
        files[rel] = {**base, "sha256": entry.get("sha256"), "values": values, "volatile": vol}
    facts = {
        "kind": raw.get("kind"),
        "sources": model.sources,
        "path": raw.get("path"),
        "exists": bool(raw.get("exists")),
        "error": raw.get("error"),
        "files": files,
        "weights": weights,
        "truncated": raw.get("truncated"),
        "other_files": raw.get("other_files"),
    }
    if hub:
        facts.update(repo=model.key, revision=raw.get("revision"), refs=raw.get("refs") or {})
    return facts


class ModelsProbe:
    name = "models"

    def collect(self, ctx: ProbeContext) -> Facts:
        # Configured directories need no environment: they do not wait for the servers'.
        early = [Model(m, "local") for m in dict.fromkeys(ctx.watch.models) if classify(m, served=False) == "local"]
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="models") as pool:
            first = pool.submit(_describe, ctx, early) if early else None
            models, servers_error = wanted_models(ctx)
            raws, counts = first.result() if first else ({}, {})
        if not models:
            if servers_error:
                raise ProbeError(f"no model configured and {servers_error}")
            raise ProbeSkipped("no server serves a model and none is configured ([watch] models)")
        late = [model for key, model in models.items() if key not in raws]
        if late:
            more, more_counts = _describe(ctx, late)
            raws.update(more)
            counts = {k: counts.get(k, 0) + v for k, v in more_counts.items()}
        previous = ctx.previous.get("models") or {}
        return {
            "models": {key: model_facts(model, raws[key], previous.get(key) or {}) for key, model in models.items()},
            "servers_error": servers_error,
            "volatile": counts,
        }


def _describe(ctx: ProbeContext, models: list[Model]) -> tuple[dict[str, Any], dict[str, int]]:
    request = {
        "models": [model.request() for model in models],
        "known": known_from(ctx.previous),
        "small": list(SMALL_FILES),
        "weights": list(WEIGHT_SUFFIXES),
        "max_small_bytes": MAX_SMALL_BYTES,
        "max_values_bytes": MAX_VALUES_BYTES,
        "max_values": MAX_VALUES,
        "max_string": MAX_STRING,
        "max_files": MAX_FILES,
        "max_depth": MAX_DEPTH,
        "seconds": max(0.5, ctx.time_left * 0.5),
    }
    report = collect_json(ctx, "models_collect.py", request, what="models", keys=("models", "counts"))
    return report["models"], report["counts"]


def _logs(ctx: ProbeContext) -> dict[str, Any]:
    try:
        return log_facts(ctx).get("logs") or {}
    except (ProbeError, ProbeSkipped):
        return {}  # the logs probe records why; the servers and the config still count
