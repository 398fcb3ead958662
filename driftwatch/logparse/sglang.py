"""SGLang logs of every era from 2024 to 2026, servers and offline benches.

Memory facts are per rank ("TP0", "DP0 TP3 EP3", "gpu_id=0" before September 2024, "main"
for the main process or a line without a tag) because a rank that had less free memory
than its peers is exactly what a regression looks like. Sizes are GB as SGLang prints them
(it divides by 2**30 but writes "GB").
"""

from __future__ import annotations

import re
from typing import Any

from driftwatch.logparse.bench import BenchScanner
from driftwatch.logparse.cmdline import is_command, take_command
from driftwatch.logparse.common import SGL_RECORD, LogFacts, split_sglang, to_float, to_number
from driftwatch.logparse.lines import clean_lines, parse_wrapped, split_records
from driftwatch.logparse.pyrepr import parse_call_kwargs, parse_dict_items

KEY_ARGS = (
    "model_path", "mem_fraction_static", "tp_size", "pp_size", "dp_size", "ep_size",
    "cuda_graph_max_bs", "chunked_prefill_size", "max_total_tokens", "max_running_requests",
    "context_length", "attention_backend", "kv_cache_dtype", "quantization", "dtype",
    "page_size", "disable_cuda_graph", "enable_dp_attention", "speculative_algorithm",
)  # fmt: skip

_ARGS = re.compile(r"server_args=(ServerArgs\(|\{)")
_RECORD_START = re.compile(r"^\[\d{4}-|^\[\d\d:\d\d:\d\d|^\[gpu_id=")
_NUM = r"(-?\d+(?:\.\d+)?)"
_AVAIL = re.compile(rf"avail(?:able)?[ _]mem(?:ory)?[=:] ?{_NUM} ?GB")
_USAGE = re.compile(rf"mem usage={_NUM} ?GB")
_SECONDS = re.compile(rf"(?:elapsed=|Time elapsed: ){_NUM} ?s")
_TOKENS = re.compile(r"#tokens: (\d+)")
_SIZE = re.compile(rf"\b(K|V|KV) size: {_NUM} ?GB")
_STATE = re.compile(rf"\b(conv_state|ssm_state) size: {_NUM} ?GB")
_MAMBA_SLOTS = re.compile(r"max_mamba_cache_size: (\d+)")
_SUMMARY = re.compile(rf"(\w{{1,60}})={_NUM}( ?GB)?")
_REDUCE = re.compile(rf"reduce --mem-fraction-static to {_NUM}")
_ARCH = re.compile(r"\btype=(\w{1,120})")
_DTYPE = re.compile(r"\b(?:dtype=|dtype: )(torch\.\w{1,40}|\w{1,40})")
_QUANT = re.compile(r"\bquant=(\w{1,40})")
_UNDER = re.compile(rf"under --mem-fraction-static={_NUM}")
_ABOVE = re.compile(rf"above {_NUM} \(minimum viable")
_CURRENT = re.compile(rf"Current value: [\w.]*mem_fraction_static={_NUM}")
_KV_DTYPE = re.compile(r"Using KV cache dtype: (\S{1,60})")
_MEMORY_WORDS = ("avail mem", "mem usage", "Cache is allocated", "Capture", "max_total_num_tokens=",
                 "reduce --mem-fraction", "available_gpu_mem")  # fmt: skip


def _first(pattern: re.Pattern[str], text: str) -> float | None:
    match = pattern.search(text)
    return to_float(match.group(1)) if match else None


def _record(facts: LogFacts, rank: str, values: dict[str, Any]) -> None:
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


def _kv_cache(facts: LogFacts, message: str) -> dict[str, Any]:
    sizes = {m.group(1): to_float(m.group(2)) for m in _SIZE.finditer(message)}
    k_size, v_size = sizes.get("K"), sizes.get("V")
    total = sizes.get("KV", round(k_size + v_size, 4) if k_size is not None and v_size is not None else None)
    tokens = _TOKENS.search(message)
    dtype = _DTYPE.search(message)
    facts.note("kv_cache_dtype", dtype.group(1) if dtype else None)
    return {"kv_cache_tokens": to_number(tokens.group(1)) if tokens else None, "k_size_gb": k_size,
            "v_size_gb": v_size, "kv_cache_gb": total}  # fmt: skip


def _mamba(message: str) -> dict[str, Any]:
    states = {m.group(1): to_float(m.group(2)) for m in _STATE.finditer(message)}
    slots = _MAMBA_SLOTS.search(message)
    total = round(sum(v for v in states.values() if v is not None), 4) if states else None
    return {"mamba_cache_gb": total, "conv_state_gb": states.get("conv_state"),
            "ssm_state_gb": states.get("ssm_state"), "max_mamba_cache_size": to_number(slots.group(1)) if slots else None}  # fmt: skip


def _weights_end(facts: LogFacts, message: str) -> dict[str, Any]:
    arch, dtype, quant = _ARCH.search(message), _DTYPE.search(message), _QUANT.search(message)
    facts.note("model_arch", arch.group(1) if arch else None)
    facts.note("dtype", dtype.group(1) if dtype else None)
    facts.note("weights_quant", quant.group(1) if quant and quant.group(1) != "None" else None)
    return {
        "avail_mem_after_load_gb": _first(_AVAIL, message),
        "weight_mem_gb": _first(_USAGE, message),
        "load_weight_s": _first(_SECONDS, message),
    }


def _summary(facts: LogFacts, message: str) -> dict[str, Any]:
    # "max_total_num_tokens=…, chunked_prefill_size=…, context_len=…, available_gpu_mem=37.06 GB":
    # printed once the scheduler is up (or by a bench once the model runner is).
    facts.engine_ready = True
    values = {m.group(1) + ("_gb" if m.group(3) else ""): to_float(m.group(2)) if m.group(3) else to_number(m.group(2))
              for m in _SUMMARY.finditer(message)}  # fmt: skip
    facts.note("max_seq_len", values.get("context_len"))
    return values


def _memory_values(facts: LogFacts, message: str) -> dict[str, Any]:
    if "Init torch distributed ends" in message:
        return {"dist_init_mem_gb": _first(_USAGE, message), "dist_init_s": _first(_SECONDS, message)}
    if "Load weight begin" in message:
        return {"avail_mem_before_load_gb": _first(_AVAIL, message)}
    if "Load weight end" in message:
        return _weights_end(facts, message)
    if "Mamba Cache is allocated" in message:
        return _mamba(message)
    if "KV Cache is allocated" in message:
        return _kv_cache(facts, message)
    if "Memory pool end" in message:
        return {"avail_mem_after_pool_gb": _first(_AVAIL, message)}
    if "Capture" in message and "graph" in message.lower() and ("begin" in message or "end." in message):
        return _graph(message)
    if "max_total_num_tokens=" in message:
        return _summary(facts, message)
    if "reduce --mem-fraction-static" in message:
        return {"mem_fraction_static_auto_reduced": _first(_REDUCE, message)}
    return {}


def _kv_shortfall(facts: LogFacts, message: str) -> None:
    """The figures a KV-budget error states ("under --mem-fraction-static=0.88", "Raise … above 0.912")."""
    values = {"mem_fraction_static": _first(_UNDER, message) or _first(_CURRENT, message),
              "minimum_viable_mem_fraction_static": _first(_ABOVE, message)}  # fmt: skip
    clean = {k: v for k, v in values.items() if v is not None}
    if clean:
        facts.extra.setdefault("kv_shortfall", {}).update(clean)


def _server_args(facts: LogFacts, line: str, lines: list[str], after: int) -> int:
    """Parse the argument line at ``line``; returns how many following lines it consumed."""
    match = _ARGS.search(line)
    if match is None:
        return 0
    parse = parse_dict_items if match.group(1) == "{" else parse_call_kwargs
    args, truncated, used = parse_wrapped(parse, line[match.end():], lines, after, _RECORD_START)
    facts.start_args(args, "dict" if match.group(1) == "{" else "ServerArgs", truncated)
    return used


def _records(line: str) -> list[str]:
    # An argument line is one record however many brackets its values hold; a line that
    # starts with its only prefix is one record too (the common case, checked cheaply).
    if "server_args=" in line or "] " not in line:
        return [line]
    if line.startswith("[") and line.count("] ") == 1 and SGL_RECORD.match(line):
        return [line]
    return split_records(line, SGL_RECORD)


def key_args(args: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in args.items() if k in KEY_ARGS or k.startswith("speculative_")}


def parse_sglang_log(text: str) -> dict[str, Any]:
    """Facts of the latest SGLang run in ``text`` (any era, any prefix, ranks interleaved)."""
    facts = LogFacts("sglang")
    bench = BenchScanner()
    lines = [record for line in clean_lines(text) for record in _records(line)]
    error_rank = "main"  # a traceback's lines carry no prefix: they belong to the rank that raised
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line:
            continue
        if "server_args=" in line and _ARGS.search(line):
            i += _server_args(facts, line, lines, i)
            continue
        if is_command(line):
            i += take_command(facts, lines, i - 1)
            continue
        facts.scan_nccl(line)
        rank, message, level = split_sglang(line)
        if rank is not None:
            error_rank = rank
        if facts.scan_error(message, error_rank, level):
            if "mem-fraction-static" in message:
                _kv_shortfall(facts, message)
            continue
        if "ready to roll" in message or "Application startup complete" in message:
            facts.ready = True
        elif "KV cache dtype" in message and (dtype := _KV_DTYPE.search(message)):
            facts.note("kv_cache_dtype", dtype.group(1))
        elif any(word in message for word in _MEMORY_WORDS):
            _record(facts, rank or "main", _memory_values(facts, message))
        elif not rank and bench.scan(message):
            facts.engine_ready = True
    result = facts.to_dict()
    result["key_args"] = key_args(facts.server_args)
    result["bench"] = bench.results
    result["mode"] = "offline" if bench.seen else "server"
    return result
