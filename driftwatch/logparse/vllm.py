"""vLLM server logs (V0 and V1 engines): arguments, KV cache sizing, errors.

vLLM prints memory in GiB (and in a few older lines "GB" that are really GiB); each key
says the unit as printed (``_gib`` / ``_gb``) so that nothing is silently rescaled.
"""

from __future__ import annotations

import re
from typing import Any

from driftwatch.logparse.common import (
    COMMON_RULES,
    LogFacts,
    Rule,
    split_vllm,
    to_float,
    to_number,
)
from driftwatch.logparse.pyrepr import parse_call_kwargs, parse_dict_items

KEY_ARGS = (
    "model", "gpu_memory_utilization", "tensor_parallel_size", "pipeline_parallel_size",
    "data_parallel_size", "enable_expert_parallel", "max_model_len", "max_num_seqs",
    "max_num_batched_tokens", "kv_cache_dtype", "kv_cache_memory_bytes", "dtype",
    "quantization", "block_size", "enforce_eager", "enable_prefix_caching", "cpu_offload_gb",
    "swap_space", "speculative_config", "num_speculative_tokens", "speculative_model",
)  # fmt: skip

RULES: list[Rule] = [
    ("no_kv_memory", ("No available memory",), re.compile(r"No available memory for the cache blocks")),
    ("kv_cache_too_small", ("KV cache",), re.compile(
        r"KV cache is needed, which is larger than the available KV cache memory"
        r"|larger than the maximum number of tokens that can be stored in KV cache"
        r"|[Ii]nsufficient memory for KV cache")),
    ("startup_memory_below_utilization", ("Free memory on device",),
     re.compile(r"Free memory on device .*less than desired GPU memory utilization")),
]  # fmt: skip

_UNIT = r"\s?(GiB|GB)"
# (key, pattern): group 1 is the number, group 2 (when present) the unit.
MEMORY_LINES: list[tuple[str, re.Pattern[str]]] = [
    ("model_weights", re.compile(r"(?:Model loading|Loading model weights) took (-?\d+(?:\.\d+)?)" + _UNIT)),
    ("available_kv_cache", re.compile(r"Available KV cache memory: (-?\d+(?:\.\d+)?)" + _UNIT)),
    ("kv_cache_reserved", re.compile(r"memory reserved for KV Cache is (-?\d+(?:\.\d+)?)" + _UNIT)),
    ("cuda_graph", re.compile(r"(?:Graph capturing finished in [\d.]+ secs?, took|CUDA graph pool memory:) (-?\d+(?:\.\d+)?)" + _UNIT)),
    ("kv_cache_tokens", re.compile(r"GPU KV cache size: (\d[\d,]*) tokens")),
    ("max_concurrency_x", re.compile(r"Maximum concurrency for [\d,]+ tokens per request: (\d+(?:\.\d+)?)x")),
    ("gpu_blocks", re.compile(r"# (?!CPU)\w+ blocks: (\d+)")),
    ("cpu_blocks", re.compile(r"# CPU blocks: (\d+)")),
]  # fmt: skip
_MEMORY_WORDS = ("took", "KV cache", "KV Cache", "blocks:", "Maximum concurrency", "CUDA graph pool")
_VERSION = re.compile(r"vLLM API server version (\S+)|LLM engine \(v([^)\s]+)\)")
_PROFILED_UTIL = re.compile(r"gpu_memory_utilization \((\d+(?:\.\d+)?)\)")
_ARGS = re.compile(r"non-default args: \{|\bargs: Namespace\(")


def _memory(facts: LogFacts, line: str) -> None:
    rank, message = split_vllm(line)
    for key, pattern in MEMORY_LINES:
        match = pattern.search(message)
        if match is None:
            continue
        unit = match.group(2).lower() if pattern.groups > 1 else ""
        value = to_number(match.group(1))
        if value is not None:  # sizes are floats even when printed "8 GiB"; counts stay ints
            facts.mem(rank, **{f"{key}_{unit}" if unit else key: float(value) if unit else value})


def key_args(args: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in args.items() if k in KEY_ARGS}


def parse_vllm_log(text: str) -> dict[str, Any]:
    """Facts of the latest vLLM run in ``text``."""
    facts = LogFacts("vllm", RULES + COMMON_RULES)
    facts.extra = {"vllm_version": None, "gpu_memory_utilization_profiled": None}
    for line in text.splitlines():
        if "args: " in line:
            match = _ARGS.search(line)
            if match:
                dict_form = match.group(0).endswith("{")
                args, truncated = (parse_dict_items if dict_form else parse_call_kwargs)(line[match.end():])
                facts.start_args(args, "non-default" if dict_form else "Namespace", truncated)
                continue
        if facts.scan_common(line):
            continue
        if "Application startup complete" in line or "Starting vLLM API server" in line:
            facts.ready = True
        elif "version" in line or "LLM engine (v" in line:
            match = _VERSION.search(line)
            if match:
                facts.extra["vllm_version"] = match.group(1) or match.group(2)
        if "gpu_memory_utilization (" in line:
            match = _PROFILED_UTIL.search(line)
            facts.extra["gpu_memory_utilization_profiled"] = to_float(match.group(1)) if match else None
        if any(word in line for word in _MEMORY_WORDS):
            _memory(facts, line)
    result = facts.to_dict()
    result["key_args"] = key_args(facts.server_args)
    # Absent from "non-default args" means vLLM's default; the profiler line says which.
    util = facts.server_args.get("gpu_memory_utilization", facts.extra["gpu_memory_utilization_profiled"])
    result["gpu_memory_utilization"] = util if isinstance(util, (int, float)) else None
    return result
