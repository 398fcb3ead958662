"""vLLM logs (V0 and V1 engines, 2024 to 2026; CUDA, ROCm, Ascend): arguments, engine config,
memory profile, KV cache sizing, readiness, errors.

vLLM prints memory in GiB (and in a few older lines "GB" that are really GiB); each key
says the unit as printed (``_gib`` / ``_gb``) so that nothing is silently rescaled.
Per-rank keys: "TP1" / "rank1" for V1 workers, "DP0" for an engine core, "pid=533" for a V0
worker process (whose rank is not printed), "main" for the untagged driver or API server.
"""

from __future__ import annotations

import re
from typing import Any

from driftwatch.logparse.bench import BenchScanner
from driftwatch.logparse.bench import snake as _snake
from driftwatch.logparse.cmdline import is_command, take_command
from driftwatch.logparse.common import (
    PROC_TAGS,
    VLLM_RECORD,
    LogFacts,
    VllmLine,
    proc_rank,
    split_vllm,
    to_float,
    to_number,
)
from driftwatch.logparse.lines import clean_lines, continuation_lines, parse_wrapped, split_records
from driftwatch.logparse.pyrepr import parse_call_kwargs, parse_dict_items, parse_loose_kwargs

KEY_ARGS = (
    "model", "gpu_memory_utilization", "tensor_parallel_size", "pipeline_parallel_size",
    "data_parallel_size", "enable_expert_parallel", "max_model_len", "max_num_seqs",
    "max_num_batched_tokens", "kv_cache_dtype", "kv_cache_memory_bytes", "dtype",
    "quantization", "block_size", "enforce_eager", "enable_prefix_caching", "cpu_offload_gb",
    "swap_space", "speculative_config", "num_speculative_tokens", "speculative_model",
)  # fmt: skip
# The engine line's names for settings the argument line calls otherwise.
_CONFIG_AS_ARGS = {"max_seq_len": "max_model_len"}

_N = r"(-?\d[\d,]*(?:\.\d+)?)"
_UNIT = r" ?(GiB|GB)"
# (key, pattern): group 1 is the number, group 2 (when present) the unit.
MEMORY_LINES: list[tuple[str, re.Pattern[str]]] = [
    ("model_weights", re.compile(rf"(?:Model loading|Loading model weights) took {_N}{_UNIT}")),
    ("available_kv_cache", re.compile(rf"Available KV cache memory: {_N}{_UNIT}")),
    ("kv_cache_reserved", re.compile(rf"memory reserved for KV Cache is {_N}{_UNIT}")),
    ("cuda_graph", re.compile(rf"(?:Graph capturing finished in [\d.]+ secs?, took|CUDA graph pool memory:) {_N}{_UNIT}")),
    ("kv_cache_tokens", re.compile(rf"GPU KV cache size: {_N} tokens")),
    ("max_concurrency_x", re.compile(rf"Maximum concurrency for [\d,]+ tokens per request: {_N}x")),
    ("max_concurrency_tokens", re.compile(rf"Maximum concurrency for {_N} tokens per request")),
    ("gpu_blocks", re.compile(r"(?:# )?(?!CPU|cpu)(?:GPU|[A-Za-z]{3,4}) blocks: (\d+)|num_gpu_blocks is: (\d+)")),
    ("cpu_blocks", re.compile(r"# CPU blocks: (\d+)")),
    ("model_load_s", re.compile(rf"Model loading took [\d.]+ ?Gi?B(?: memory)? and {_N} ?s")),
    ("weights_load_s", re.compile(rf"Loading weights took {_N} ?s")),
    ("graph_capture_s", re.compile(rf"Graph capturing finished in {_N} secs?")),
    ("profile_s", re.compile(rf"Memory profiling takes {_N} ?s")),
    ("init_engine_s", re.compile(rf"init engine \(profile, create kv cache, warmup model\) took {_N} ?s")),
    ("torch_compile_s", re.compile(rf"torch\.compile takes {_N} ?s in total")),
    ("total_gpu_memory", re.compile(rf"total_gpu_memory \({_N}{_UNIT}\) x")),
    ("usable_memory", re.compile(rf"x gpu_memory_utilization \([\d.]+\) = {_N}{_UNIT}")),
    ("profiled_weights", re.compile(rf"model weights take {_N}{_UNIT}")),
    ("non_torch_memory", re.compile(rf"non_torch_memory takes {_N}{_UNIT}")),
    ("activation_peak", re.compile(rf"activation peak memory takes {_N}{_UNIT}")),
    ("free_on_startup", re.compile(rf"Free memory on device \({_N}/[\d.]+{_UNIT}\)")),
    ("total_on_startup", re.compile(rf"Free memory on device \([\d.]+/{_N}{_UNIT}\)")),
    ("requested_memory", re.compile(rf"[Dd]esired GPU memory utilization(?: is)? \([\d.]+, {_N}{_UNIT}\)")),
    ("kv_cache_memory_fit_bytes", re.compile(r"--kv-cache-memory=(\d+)`? to fit into requested memory")),
    ("kv_cache_memory_max_bytes", re.compile(r"--kv-cache-memory=(\d+)`? to fully utilize")),
    ("kv_cache_in_use_bytes", re.compile(r"kv cache memory in use is (\d+) bytes")),
]  # fmt: skip
# A literal each MEMORY_LINES pattern needs: most lines of a serving log match none of them.
_KEYWORDS = {
    "model_weights": "took", "available_kv_cache": "Available KV", "kv_cache_reserved": "reserved for KV",
    "cuda_graph": "raph", "kv_cache_tokens": "KV cache size", "max_concurrency_x": "concurrency",
    "max_concurrency_tokens": "concurrency", "gpu_blocks": "blocks", "cpu_blocks": "CPU blocks",
    "model_load_s": "Model loading", "weights_load_s": "Loading weights", "graph_capture_s": "Graph capturing",
    "profile_s": "profiling takes", "init_engine_s": "init engine", "torch_compile_s": "torch.compile",
    "total_gpu_memory": "total_gpu_memory", "usable_memory": "x gpu_memory", "profiled_weights": "weights take",
    "non_torch_memory": "non_torch_memory takes", "activation_peak": "activation peak", "free_on_startup": "Free memory",
    "total_on_startup": "Free memory", "requested_memory": "esired GPU memory", "kv_cache_memory_fit_bytes": "--kv-cache",
    "kv_cache_memory_max_bytes": "--kv-cache", "kv_cache_in_use_bytes": "in use is",
}  # fmt: skip
_MEMORY_WORDS = ("took", "KV cache", "KV Cache", "blocks:", "blocks is:", "Maximum concurrency", "CUDA graph pool",
                 "takes", "total_gpu_memory", "Free memory on device", "memory: ", "profiling results",
                 "requested memory")  # fmt: skip
# "Memory profiling results: total_gpu_memory=23.58GiB initial_memory_usage=15.34GiB …" (0.6.4):
_PAIRS = re.compile(rf"\b([a-z][a-z_]{{1,60}})={_N}(GiB|GB)?(?=[\s,;.]|$)")
# "… Total non KV cache memory: 16.51GiB; torch peak memory increase: 1.21GiB; …" (V1 0.8-0.10):
_LABELLED = re.compile(rf"([A-Za-z][A-Za-z -]{{1,60}}): {_N}{_UNIT}")
# "Actual usage is 74.28 GiB for weight, 5.58 GiB for peak activation, …" (V1 0.11+):
_USAGE_FOR = re.compile(rf"{_N}{_UNIT} for ([A-Za-z][\w -]{{1,40}}?)(?=,|\.| and|$)")
_UTILIZATION = re.compile(
    r"gpu_memory_utilization \((\d+(?:\.\d+)?)\)|gpu_memory_utilization=(\d+(?:\.\d+)?)"
    r"|[Dd]esired GPU memory utilization(?: is)? \((\d+(?:\.\d+)?),"
)
_VERSION = re.compile(
    r"vLLM API server version (\S+)|LLM engine \(v([^)\s]+)\)|vLLM [Vv]ersion\s*: (\S+)|█ +version +(\S+)"
)
_ENGINE = re.compile(r"Initializing an? (?:(V\d) )?LLM engine(?: \(v[^)\s]*\))? with config: ")
_ARGS = re.compile(r"non-default args: \{|\bargs: Namespace\(")
_RECORD_START = re.compile(r"^\(|^(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) ")
_ARCH = re.compile(r"Resolved architecture: (\w{1,120})")
_LOAD = re.compile(r"Starting to load model (\S{1,500}?)(?:\.\.\.)?$")
_BANNER_MODEL = re.compile(r"█ +model +(\S{1,500})$")
_MAX_LEN = re.compile(r"Using max model len (\d+)")
_BATCHED = re.compile(r"max_num_batched_tokens=(\d+)")
_WORLD = re.compile(r"in world size (\d+) is assigned as (.{0,120})")
_PLATFORM = re.compile(r"Automatically detected platform (\w{1,40})")
_NCCL_LIB = re.compile(r"Found nccl from library (\S{1,500})")
_BACKEND = re.compile(r"^Using ([\w .-]{1,80}?) backend\b")
_BLOCK_SIZE = re.compile(r"Setting attention block size to (\d+) tokens")
_SHORTFALL = [
    ("max_seq_len", re.compile(r"max seq len \((\d+)\)")),
    ("kv_cache_tokens", re.compile(r"tokens that can be stored in KV cache \((\d+)\)")),
    ("kv_needed_gib", re.compile(rf"\(?{_N} GiB KV cache is needed")),
    ("kv_available_gib", re.compile(rf"available KV cache memory \({_N} GiB\)")),
    ("estimated_max_model_len", re.compile(r"estimated maximum model length is (\d+)")),
]
# The first line of an ERROR record is prose ("Worker proc … died", "Error executing method …");
# a paste that starts inside a traceback must not make a frame or a source line one.
_HEADLINE = re.compile(r"(?!Traceback|File |During handling|The above exception)[A-Z\[][^=]{0,300}?(?<!\()$")
_DRAFTABLE = ("model_weights_gib", "model_weights_gb", "model_load_s", "weights_load_s")


def _put(facts: LogFacts, rank: str, found: dict[str, Any], key: str, value: Any) -> None:
    known = facts.memory.get(rank, {})
    if key in _DRAFTABLE and key in known and known[key] != value:
        key = "draft_" + key  # a second model (a speculative drafter) loaded after the target
    facts.mem(rank, **{key: value})
    found[key] = value


def _memory(facts: LogFacts, rank: str, message: str) -> dict[str, Any]:
    """Record the memory figures ``message`` states; returns them."""
    found: dict[str, Any] = {}
    for key, pattern in MEMORY_LINES:
        if _KEYWORDS[key] not in message:
            continue
        match = pattern.search(message)
        if match is None:
            continue
        groups = [g for g in match.groups() if g is not None]
        unit = groups[1].lower() if len(groups) > 1 and groups[1] in ("GiB", "GB") else ""
        value = to_number(groups[0]) if groups else None
        if value is not None:  # sizes are floats even when printed "8 GiB"; counts stay ints
            _put(facts, rank, found, f"{key}_{unit}" if unit else key, float(value) if unit else value)
    if "profiling results" in message:
        for m in _PAIRS.finditer(message):
            number = to_number(m.group(2))
            if number is not None:
                _put(facts, rank, found, f"{m.group(1)}_{m.group(3).lower()}" if m.group(3) else m.group(1), number)
    elif "Memory profiling takes" in message or "requested memory" in message:
        for m in _LABELLED.finditer(message):
            number = to_float(m.group(2))
            if number is not None:
                _put(facts, rank, found, f"{_snake(m.group(1))}_{m.group(3).lower()}", number)
    if "for weight" in message:
        for m in _USAGE_FOR.finditer(message):
            number = to_float(m.group(1))
            if number is not None:
                _put(facts, rank, found, f"{_snake(m.group(3))}_usage_{m.group(2).lower()}", number)
    return found


_NEGATIVE_KV = ("available_kv_cache_gib", "available_kv_cache_gb", "kv_cache_reserved_gib", "kv_cache_size_gib")


def _kv_value_errors(facts: LogFacts, rank: str, message: str, values: dict[str, Any]) -> None:
    """A negative KV budget or zero GPU blocks are how vLLM says, in an INFO line, that the
    KV cache does not fit: an error of kind kv-budget, even before (or without) the exception."""
    if any(isinstance(values.get(k), (int, float)) and values[k] < 0 for k in _NEGATIVE_KV):
        facts.add_error("kv-budget", "negative_kv_memory", message.strip()[:300], rank)
    if values.get("gpu_blocks") == 0:
        facts.add_error("kv-budget", "zero_gpu_blocks", message.strip()[:300], rank)


def _run_facts(facts: LogFacts, message: str) -> None:
    """Run-level facts: the version, the model, how the engine sized itself, the platform."""
    if "ersion" in message:
        match = _VERSION.search(message)
        if match:
            facts.note("vllm_version", next(g for g in match.groups() if g))
    if "gpu_memory_utilization" in message or "GPU memory utilization" in message:
        match = _UTILIZATION.search(message)
        if match:
            facts.note("gpu_memory_utilization_profiled", to_float(next(g for g in match.groups() if g)))
    for key, word, pattern, convert in (
        ("model_arch", "Resolved", _ARCH, str), ("model_loaded", "Starting to load", _LOAD, str),
        ("model_loaded", "█", _BANNER_MODEL, str), ("max_seq_len", "max model len", _MAX_LEN, int),
        ("max_num_batched_tokens", "max_num_batched_tokens=", _BATCHED, int),
        ("platform", "detected platform", _PLATFORM, str), ("nccl_library", "nccl from library", _NCCL_LIB, str),
        ("attention_backend", " backend", _BACKEND, str), ("block_size", "attention block size", _BLOCK_SIZE, int),
    ):  # fmt: skip
        if word not in message:
            continue
        match = pattern.search(message)
        if match:
            facts.note(key, convert(match.group(1)))
    if "in world size" in message:
        world = _WORLD.search(message)
        if world:
            facts.note("world_size", int(world.group(1)))
    if "max seq len" in message or "KV cache is needed" in message:
        values = {k: to_number(m.group(1)) for k, p in _SHORTFALL if (m := p.search(message))}
        facts.extra.setdefault("kv_shortfall", {}).update({k: v for k, v in values.items() if v is not None})


def _args(facts: LogFacts, line: str, match: re.Match[str], lines: list[str], after: int) -> int:
    """Parse the argument line; returns how many following lines (a wrapped paste) it took."""
    dict_form = match.group(0).endswith("{")
    parse = parse_dict_items if dict_form else parse_call_kwargs
    args, truncated, used = parse_wrapped(parse, line[match.end():], lines, after, _RECORD_START)
    facts.start_args(args, "non-default" if dict_form else "Namespace", truncated)
    return used


def _engine_config(facts: LogFacts, line: str, match: re.Match[str]) -> None:
    # After a run that got somewhere, a new engine line is a new run (an offline script that
    # builds a second LLM); before, it is the engine of the run the argument line began.
    if facts.ready or facts.engine_ready or facts.errors:
        facts.new_run()
    elif not facts.runs:
        facts.runs = 1
    config = parse_loose_kwargs(line[match.end():])
    facts.extra["engine_config"] = config
    if match.group(1):
        facts.extra["engine_generation"] = match.group(1)
    version = _VERSION.search(line, 0, match.end())
    if version:
        facts.note("vllm_version", next(g for g in version.groups() if g))


def key_args(args: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    """Effective settings: the argument line's, then the engine line's for what it left out."""
    chosen = {k: v for k, v in args.items() if k in KEY_ARGS}
    for key, value in config.items():
        name = _CONFIG_AS_ARGS.get(key, key)
        if name in KEY_ARGS and name not in chosen and value is not None:
            chosen[name] = value
    return chosen


def _records(line: str) -> list[str]:
    # Two records glued on one line name two source locations.
    return split_records(line, VLLM_RECORD, PROC_TAGS) if line.count(".py:") > 1 else [line]


class _Ranks:
    """Which rank a line belongs to, including lines whose process tag was glued onto another's:
    "(pid=536) (pid=532) INFO … A" then "INFO … B": A is 532's, B is 536's."""

    def __init__(self) -> None:
        self.pending: list[str] = []
        self.last = "main"

    def of(self, parsed: VllmLine) -> str:
        if parsed.glued:
            self.pending = (self.pending + [proc_rank(tag) for tag in parsed.glued])[-8:]
        if parsed.level and not parsed.proc and self.pending:
            rank = self.pending.pop(0)
        elif not parsed.level and not parsed.proc:
            rank = self.last  # a continuation line of the previous record
        else:
            rank = parsed.rank
        self.last = rank
        return rank


def parse_vllm_log(text: str) -> dict[str, Any]:
    """Facts of the latest vLLM run in ``text``."""
    facts = LogFacts("vllm")
    bench = BenchScanner()
    ranks = _Ranks()
    error_blocks: dict[str, str] = {}  # rank -> location of its current ERROR record
    offline = False  # LLM.generate's "Processed prompts" bar: an offline run, no server
    lines = [record for line in clean_lines(text) for record in _records(line)]
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line:
            continue
        if "args: " in line:
            match = _ARGS.search(line)
            if match:
                i += _args(facts, line, match, lines, i)
                continue
        if "LLM engine" in line:
            match = _ENGINE.search(line)
            if match:
                used = continuation_lines(lines, i, _RECORD_START)
                _engine_config(facts, "".join([line, *lines[i : i + used]]), match)
                i += used
                continue
        if is_command(line):
            i += take_command(facts, lines, i - 1)
            continue
        facts.scan_nccl(line)
        parsed = split_vllm(line)
        rank, message = ranks.of(parsed), parsed.message
        # One ERROR record spans many lines (a traceback): its first line is its message.
        loud = parsed.level in ("ERROR", "CRITICAL")
        header = loud and error_blocks.get(rank) != parsed.where
        if parsed.level:
            error_blocks[rank] = parsed.where if loud else ""
        header = header and _HEADLINE.match(message.strip()) is not None
        if not facts.scan_error(message, rank, parsed.level) and header:
            facts.add_error("other", "error_record", message.strip()[:300], rank)
        if "Application startup complete" in message or "Starting vLLM API server" in message:
            facts.ready = True
        if any(word in message for word in _MEMORY_WORDS):
            _kv_value_errors(facts, rank, message, _memory(facts, rank, message))
        if "Processed prompts" in message:
            offline = True
        if "init engine" in message and "took" in message:
            facts.engine_ready = True
        _run_facts(facts, message)
        if not parsed.level and bench.scan(message):
            facts.engine_ready = True
    return _result(facts, bench, offline)


def _result(facts: LogFacts, bench: BenchScanner, offline: bool) -> dict[str, Any]:
    result = facts.to_dict()
    config = facts.extra.get("engine_config") or {}
    result["key_args"] = key_args(facts.server_args, config)
    # Absent from "non-default args" means vLLM's default; the profiler line says which.
    util = result["key_args"].get("gpu_memory_utilization", facts.extra.get("gpu_memory_utilization_profiled"))
    result["gpu_memory_utilization"] = util if isinstance(util, (int, float)) else None
    result.setdefault("vllm_version", None)
    result.setdefault("gpu_memory_utilization_profiled", None)
    result["bench"] = bench.results
    result["mode"] = "offline" if bench.seen or offline else "server"
    return result
