"""One log's facts as a person reads them: which engine and model, how it sized itself, whether
it came up and, if not, why.

``finalize`` adds the derived keys every consumer wants (``model``, ``parallel``,
``memory_fraction``, ``max_seq_len``, ``headline_rank``, ``headline``); ``summarize_log`` turns
them into a few lines for ``show`` and the diff ("vLLM 0.6.4.post1, model X, TP 8: KV cache
1,280 tokens < max seq len 8,192; not ready: engine-start error …"). Both are pure and read
only what the parsers stored: a figure the log did not print is never shown.
"""

from __future__ import annotations

import re
from typing import Any

from driftwatch.logparse.common import rank_order
from driftwatch.logparse.errors import cause_rank

_TP_TAG = re.compile(r"\bTP(\d+)\b|^gpu_id=(\d+)$")
_PARALLEL_KEYS = {
    "tp": ("tp_size", "tensor_parallel_size"),
    "pp": ("pp_size", "pipeline_parallel_size"),
    "dp": ("dp_size", "data_parallel_size"),
    "ep": ("ep_size", "expert_parallel_size"),
}
ENGINE_NAMES = {"sglang": "SGLang", "vllm": "vLLM"}


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _number(value: Any) -> float | int | None:
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _sources(facts: dict[str, Any]) -> list[dict[str, Any]]:
    """Settings as the log states them, most authoritative first: the server's argument line,
    the engine's config line, a launch command written into the log."""
    command = _dict(facts.get("command"))
    return [_dict(facts.get("server_args")), _dict(facts.get("engine_config")), _dict(command.get("args"))]


def _setting(facts: dict[str, Any], *names: str) -> Any:
    for source in _sources(facts):
        for name in names:
            if source.get(name) is not None:
                return source[name]
    return None


def headline_memory(facts: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """(headline rank, its figures): TP0 / rank 0 first, then the untagged main process, then
    the others, each figure from the first rank that printed it."""
    memory = _dict(facts.get("memory"))
    order = sorted(memory, key=rank_order)
    merged: dict[str, Any] = {}
    for rank in order:
        for key, value in _dict(memory[rank]).items():
            merged.setdefault(key, value)
    return (order[0] if order else None), merged


def _parallel(facts: dict[str, Any]) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for short, names in _PARALLEL_KEYS.items():
        value = _number(_setting(facts, *names))
        if value is not None:
            sizes[short] = int(value)
    if "tp" not in sizes:  # no argument line: tags up to TP7 still say that eight TP ranks ran
        ranks = [int(m.group(1) or m.group(2)) for rank in _dict(facts.get("memory")) for m in _TP_TAG.finditer(rank)]
        if ranks and max(ranks) > 0:
            sizes["tp"] = max(ranks) + 1
    return sizes


def _memory_fraction(facts: dict[str, Any], headline: dict[str, Any]) -> float | None:
    if facts.get("kind") == "vllm":
        value = facts.get("gpu_memory_utilization")
        if _number(value) is None:
            value = _setting(facts, "gpu_memory_utilization")
    else:
        value = headline.get("mem_fraction_static_auto_reduced")
        if _number(value) is None:
            value = _setting(facts, "mem_fraction_static")
        if _number(value) is None:
            value = _dict(facts.get("kv_shortfall")).get("mem_fraction_static")
    number = _number(value)
    return float(number) if number is not None else None


def _max_seq_len(facts: dict[str, Any], headline: dict[str, Any]) -> int | None:
    for value in (
        headline.get("context_len"), facts.get("max_seq_len"), _setting(facts, "max_seq_len", "max_model_len"),
        _setting(facts, "context_length"), _dict(facts.get("kv_shortfall")).get("max_seq_len"),
    ):  # fmt: skip
        number = _number(value)
        if number is not None:
            return int(number)
    return None


def finalize(facts: dict[str, Any]) -> dict[str, Any]:
    """``facts`` with the derived keys added (in place; also returned)."""
    if facts.get("kind") is None:
        return facts
    rank, headline = headline_memory(facts)
    model = _setting(facts, "model_path", "model")
    command = _dict(facts.get("command"))
    facts["model"] = model if isinstance(model, str) else command.get("model") or facts.get("model_loaded")
    facts["version"] = facts.get("vllm_version") if facts.get("kind") == "vllm" else facts.get("version")
    facts["parallel"] = _parallel(facts)
    facts["memory_fraction"] = _memory_fraction(facts, headline)
    facts["max_seq_len"] = _max_seq_len(facts, headline)
    facts["headline_rank"] = rank
    facts["headline"] = headline
    if facts.get("mode") == "offline" and facts.get("engine_ready"):
        facts["ready"] = True  # an offline run has no server: the engine coming up is the goal
    return facts


# ---- summary lines -------------------------------------------------------------------------


def _fmt(value: Any, unit: str = "") -> str:
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, int):
        return f"{value:,}{unit}"
    if isinstance(value, float):
        return f"{value:,.2f}".rstrip("0").rstrip(".") + unit
    return f"{value}{unit}"


def _size(headline: dict[str, Any], *keys: str) -> str | None:
    """The first of ``keys`` present, with its unit as the server printed it."""
    for key in keys:
        value = _number(headline.get(key))
        if value is not None:
            unit = " GiB" if key.endswith("_gib") else " GB" if key.endswith("_gb") else ""
            return _fmt(float(value), unit)
    return None


def _identity(facts: dict[str, Any]) -> str:
    kind = facts.get("kind")
    name = ENGINE_NAMES.get(str(kind), "unknown server")
    words = [f"{name} {facts['version']}" if facts.get("version") else name]
    if facts.get("model"):
        words.append(f"model {facts['model']}")
    elif facts.get("model_arch"):
        words.append(f"model {facts['model_arch']}")
    parallel = _dict(facts.get("parallel"))
    sizes = " ".join(f"{k.upper()} {v}" for k, v in parallel.items() if k == "tp" or v != 1)
    if sizes:
        words.append(sizes)
    if facts.get("mode") == "offline":
        words.append("offline run")
    if facts.get("platform") and facts.get("platform") != "cuda":
        words.append(f"on {facts['platform']}")
    return ", ".join(words)


def _kv_tokens(facts: dict[str, Any], headline: dict[str, Any]) -> int | None:
    for value in (headline.get("kv_cache_tokens"), headline.get("max_total_num_tokens"),
                  _dict(facts.get("kv_shortfall")).get("kv_cache_tokens")):  # fmt: skip
        number = _number(value)
        if number is not None:
            return int(number)
    return None


def _memory_line(facts: dict[str, Any], headline: dict[str, Any]) -> str:
    parts = []
    if facts.get("memory_fraction") is not None:
        flag = "gpu_memory_utilization" if facts.get("kind") == "vllm" else "mem_fraction_static"
        parts.append(f"{flag} {_fmt(facts['memory_fraction'])}")
    for label, keys in (
        ("free before weights", ("avail_mem_before_load_gb",)),
        ("free on startup", ("free_on_startup_gib",)),
        ("total", ("total_gpu_memory_gib", "total_on_startup_gib")),
        ("weights", ("weight_mem_gb", "model_weights_gib", "model_weights_gb", "weights_memory_gib",
                     "profiled_weights_gib", "weight_usage_gib", "weights_usage_gib")),
        ("free after weights", ("avail_mem_after_load_gb",)),
    ):
        shown = _size(headline, *keys)
        if shown is not None:
            parts.append(f"{label} {shown}")
    kv_size = _size(headline, "kv_cache_gb", "available_kv_cache_gib", "available_kv_cache_gb", "kv_cache_reserved_gib",
                    "kv_cache_size_gib")
    tokens = _kv_tokens(facts, headline)
    kv = " ".join(filter(None, [_fmt(tokens, " tokens") if tokens is not None else None,
                                f"({kv_size})" if kv_size and tokens is not None else kv_size]))  # fmt: skip
    if kv:
        parts.append(f"KV cache {kv}")
    if _number(headline.get("gpu_blocks")) is not None:
        parts.append(f"GPU blocks {_fmt(headline['gpu_blocks'])}")
    if _number(headline.get("max_concurrency_x")) is not None:
        parts.append(f"max concurrency {_fmt(headline['max_concurrency_x'])}x")
    graph = _size(headline, "graph_mem_gb", "cuda_graph_gib", "cuda_graph_gb")
    if graph is not None:
        parts.append(f"CUDA graphs {graph}")
    return "; ".join(parts)


def _shortfall(facts: dict[str, Any], headline: dict[str, Any]) -> str | None:
    """"KV cache 1,280 tokens < max seq len 8,192": only when the log printed both."""
    tokens, max_len = _kv_tokens(facts, headline), facts.get("max_seq_len")
    if tokens is not None and isinstance(max_len, int) and tokens < max_len:
        return f"KV cache {tokens:,} tokens < max seq len {max_len:,}"
    short = _dict(facts.get("kv_shortfall"))
    needed, available = _number(short.get("kv_needed_gib")), _number(short.get("kv_available_gib"))
    if needed is not None and available is not None:
        need = f" for max seq len {max_len:,}" if isinstance(max_len, int) else ""
        return f"KV cache {_fmt(float(available), ' GiB')} < {_fmt(float(needed), ' GiB')} needed{need}"
    return None


def _state(facts: dict[str, Any]) -> str:
    errors = [e for e in facts.get("errors") or [] if isinstance(e, dict)]
    if facts.get("ready"):
        state = "ready"
    elif errors:
        state = "not ready"
    else:
        state = "not ready (no error in the log)"
    if errors:
        ranked = sorted(errors, key=lambda e: cause_rank(e.get("kind")))  # facts stored before they were sorted
        first = ranked[0]
        count = f" ({first.get('count')}×)" if (first.get("count") or 1) > 1 else ""
        more = f"; {len(errors) - 1} more error(s)" if len(errors) > 1 else ""
        state += f": {first.get('kind')} error{count}: {first.get('message')}{more}"
    return state


def summarize_log(facts: dict[str, Any]) -> list[str]:
    """Headline lines for one log's facts (as stored under ``logs[glob]``)."""
    if facts.get("error"):
        return [f"{facts.get('path') or 'log'}: {facts['error']}"]
    if facts.get("kind") is None:
        errors = facts.get("errors") or []
        return ["not an SGLang or vLLM log" + (f"; {len(errors)} error(s)" if errors else "")]
    headline = _dict(facts.get("headline")) or headline_memory(facts)[1]
    first = _identity(facts)
    shortfall = _shortfall(facts, headline)
    lines = [f"{first}: {shortfall}" if shortfall else first]
    memory = _memory_line(facts, headline)
    if memory:
        lines.append(memory)
    lines.append(_state(facts))
    if facts.get("nccl_versions"):
        lines.append("NCCL " + ", ".join(str(v) for v in facts["nccl_versions"]))
    bench = _dict(facts.get("bench"))
    if bench:
        lines.append("bench: " + ", ".join(f"{k} {_fmt(v)}" for k, v in list(bench.items())[:6]))
    return lines
