"""SGLang server logs, every era from 2024 to 2026: effective arguments, memory, errors.

Memory facts are per rank ("TP0", "DP0 TP3 EP3", "main" for the main process) because a
rank that had less free memory than its peers is exactly what a regression looks like.
Sizes are GB as SGLang prints them (it divides by 2**30 but writes "GB").
"""

from __future__ import annotations

import re
from typing import Any

from driftwatch.logparse.common import (
    COMMON_RULES,
    SGL_PREFIX,
    LogFacts,
    Rule,
    split_sglang,
    to_float,
    to_number,
)
from driftwatch.logparse.pyrepr import parse_call_kwargs, parse_dict_items

KEY_ARGS = (
    "model_path", "mem_fraction_static", "tp_size", "pp_size", "dp_size", "ep_size",
    "cuda_graph_max_bs", "chunked_prefill_size", "max_total_tokens", "max_running_requests",
    "context_length", "attention_backend", "kv_cache_dtype", "quantization", "dtype",
    "page_size", "disable_cuda_graph", "enable_dp_attention", "speculative_algorithm",
)  # fmt: skip

RULES: list[Rule] = [
    # "enought" is the v0.1.x spelling; later eras append "Current value: ...=0.85".
    ("not_enough_memory", ("--mem-fraction-static",),
     re.compile(r"Not enought? memory\.?\s*Please (?:try to )?increase --mem-fraction-static")),
    ("no_kv_memory", ("leave no GPU memory",), re.compile(r"Loaded weights leave no GPU memory for the KV cache")),
]  # fmt: skip

_ARGS = re.compile(r"server_args=(ServerArgs\(|\{)")
# A repr broken over lines by a terminal or a paste ("log_requests=Fa" / "lse, ..."):
# the next line carries more key=value items and is not a new log record.
_CONTINUATION = re.compile(r"^(?!\[\d{4}-)\S.*(?:[A-Za-z_]\w*=|'\w+': )")
_AVAIL = re.compile(r"avail mem=(-?\d+(?:\.\d+)?) ?GB")
_USAGE = re.compile(r"mem usage=(-?\d+(?:\.\d+)?) ?GB")
_SECONDS = re.compile(r"(?:elapsed=|Time elapsed: )(\d+(?:\.\d+)?) ?s")
_TOKENS = re.compile(r"#tokens: (\d+)")
_SIZE = re.compile(r"\b(K|V|KV) size: (\d+(?:\.\d+)?) ?GB")
_STATE = re.compile(r"(?:conv_state|ssm_state) size: (\d+(?:\.\d+)?) ?GB")
_SUMMARY = re.compile(r"(\w+)=(-?\d+(?:\.\d+)?)( ?GB)?")
_REDUCE = re.compile(r"reduce --mem-fraction-static to (\d+(?:\.\d+)?)")
_MEMORY_WORDS = ("avail mem", "mem usage", "Cache is allocated", "Capture", "max_total_num_tokens=", "reduce --mem-fraction")


def _first(pattern: re.Pattern[str], text: str) -> float | None:
    match = pattern.search(text)
    return to_float(match.group(1)) if match else None


def _record(facts: LogFacts, rank: str, values: dict[str, float | None]) -> None:
    # A second "Load weight end" / "KV Cache is allocated" in the same run is the
    # speculative draft model's; it must not overwrite the target model's numbers.
    clean = {k: v for k, v in values.items() if v is not None}
    if not clean:  # e.g. "Capture cuda graph bs [1, 2, ...]": nothing to record
        return
    known = facts.memory.get(rank, {})
    repeat = any(k in known for k in clean)
    facts.mem(rank, **{("draft_" + k if repeat else k): v for k, v in clean.items()})


def _graph(message: str) -> dict[str, float | None]:
    lower = message.lower()
    kind = "piecewise_" if "piecewise" in lower else "draft_" if "draft" in lower else ""
    if "graph begin" in lower:
        return {f"avail_mem_before_{kind}graph_gb": _first(_AVAIL, message)}
    return {
        f"{kind}graph_mem_gb": _first(_USAGE, message),
        f"avail_mem_after_{kind}graph_gb": _first(_AVAIL, message),
        f"{kind}graph_capture_s": _first(_SECONDS, message),
    }


def _memory_values(message: str) -> dict[str, float | None]:
    if "Init torch distributed ends" in message:
        return {"dist_init_mem_gb": _first(_USAGE, message)}
    if "Load weight begin" in message:
        return {"avail_mem_before_load_gb": _first(_AVAIL, message)}
    if "Load weight end" in message:
        return {
            "avail_mem_after_load_gb": _first(_AVAIL, message),
            "weight_mem_gb": _first(_USAGE, message),
            "load_weight_s": _first(_SECONDS, message),
        }
    if "KV Cache is allocated" in message:
        sizes = {m.group(1): to_float(m.group(2)) for m in _SIZE.finditer(message)}
        k_size, v_size = sizes.get("K"), sizes.get("V")
        total = sizes.get("KV", round(k_size + v_size, 4) if k_size is not None and v_size is not None else None)
        tokens = _TOKENS.search(message)
        return {"kv_cache_tokens": to_number(tokens.group(1)) if tokens else None, "k_size_gb": sizes.get("K"),
                "v_size_gb": sizes.get("V"), "kv_cache_gb": total}  # fmt: skip
    if "Mamba Cache is allocated" in message:
        states = [to_float(m.group(1)) or 0.0 for m in _STATE.finditer(message)]
        return {"mamba_cache_gb": round(sum(states), 4) if states else None}
    if "Memory pool end" in message:
        return {"avail_mem_after_pool_gb": _first(_AVAIL, message)}
    if "Capture" in message and "graph" in message.lower() and ("begin" in message or "end." in message):
        return _graph(message)
    if "max_total_num_tokens=" in message:
        return {m.group(1) + ("_gb" if m.group(3) else ""): to_float(m.group(2)) if m.group(3) else to_number(m.group(2))
                for m in _SUMMARY.finditer(message)}  # fmt: skip
    if "reduce --mem-fraction-static" in message:
        return {"mem_fraction_static_auto_reduced": _first(_REDUCE, message)}
    return {}


def _server_args(facts: LogFacts, line: str, lines: list[str], after: int) -> int:
    """Parse the argument line at ``line``; returns how many following lines it consumed."""
    match = _ARGS.search(line)
    if match is None:
        return 0
    parse = parse_dict_items if match.group(1) == "{" else parse_call_kwargs
    body = line[match.end():]
    args, truncated = parse(body)
    used = 0
    while truncated and used < 5 and after + used < len(lines):
        nxt = lines[after + used]
        if SGL_PREFIX.search(nxt) or not _CONTINUATION.match(nxt):
            break
        body, used = body + nxt, used + 1
        args, truncated = parse(body)
    facts.start_args(args, "dict" if match.group(1) == "{" else "ServerArgs", truncated)
    return used


def key_args(args: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in args.items() if k in KEY_ARGS or k.startswith("speculative_")}


def parse_sglang_log(text: str) -> dict[str, Any]:
    """Facts of the latest SGLang run in ``text`` (any era, any prefix, ranks interleaved)."""
    facts = LogFacts("sglang", RULES + COMMON_RULES)
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if "server_args=" in line and _ARGS.search(line):
            i += _server_args(facts, line, lines, i)
            continue
        if facts.scan_common(line):
            continue
        if "ready to roll" in line or "Application startup complete" in line:
            facts.ready = True
        elif any(word in line for word in _MEMORY_WORDS):
            rank, message = split_sglang(line)
            _record(facts, rank, _memory_values(message))
    result = facts.to_dict()
    result["key_args"] = key_args(facts.server_args)
    return result
