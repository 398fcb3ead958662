"""Pure parsers for inference-server logs: text in, JSON-safe facts out.

``detect_and_parse`` tells SGLang from vLLM by markers only these servers print, and
``parse_log_parts`` merges the head (where the arguments are) and the tail (where the
errors are) of a log too large to read whole. ``summarize_log`` turns one log's facts
into the headline lines ``show`` and the diff print.
"""

from __future__ import annotations

import re
from typing import Any

from driftwatch.logparse.common import LogFacts, rank_order, split_sglang, split_vllm
from driftwatch.logparse.errors import cause_rank
from driftwatch.logparse.headline import finalize, summarize_log
from driftwatch.logparse.lines import clean_lines
from driftwatch.logparse.mentions import merge
from driftwatch.logparse.sglang import parse_sglang_log as _parse_sglang
from driftwatch.logparse.vllm import parse_vllm_log as _parse_vllm

__all__ = [
    "detect_and_parse", "detect_kind", "parse_as", "parse_log_parts", "parse_sglang_log",
    "parse_vllm_log", "summarize_log",
]  # fmt: skip

# (weight, literal markers). Old SGLang imported vLLM, so vLLM-style lines can show up in an
# SGLang log: only markers the other server never prints weigh much. Literals, not regular
# expressions: ``in`` scans a 4 MiB log at memory speed; an alternation would step through it.
Markers = list[tuple[int, tuple[str, ...]]]
_SGLANG_MARKERS: Markers = [
    (5, ("server_args=ServerArgs(", "server_args={")),
    (3, ("Load weight begin.", "Load weight end.", "KV Cache is allocated.", "Memory pool end.")),
    (3, ("fired up and ready to roll", "max_total_num_tokens=", "--mem-fraction-static")),
    (3, ("sglang.launch_server", "sglang.bench_", "sglang serve", "sglang/srt/", "sgl_kernel")),
    (3, ("Scheduler hit an exception", "ModelTpServer", "Received sigquit from a child", "alloc_req_slots",
         "Decode batch. #running-req", "Decode batch, #running-req", "Prefill. latency: ", "Decode.  median latency: ")),
    (1, ("sglang",)),
]
_VLLM_MARKERS: Markers = [
    (5, ("non-default args: {", "vLLM API server version", "args: Namespace(")),
    (3, ("GPU KV cache size: ", "Available KV cache memory: ", "# GPU blocks: ", "num_gpu_blocks is: ",
         "Free memory on device (", "No available memory for the cache blocks")),
    (3, ("LLM engine (v", "LLM engine with config", "gpu_memory_utilization", "(EngineCore")),
    (3, ("vllm serve", "vllm.entrypoints", "VllmWorker", "RayWorkerWrapper", "(APIServer pid=", "(Worker_",
         "(Worker pid=", "vLLM is using nccl", "nccl from library", "site-packages/vllm/", "vllm/v1/")),
    (1, ("vllm",)),
]
# Line prefixes, looked for in a window at each end only (a regex scan costs per character).
_SGLANG_PREFIX = re.compile(r"(?:\[|^)(?:\d{4}-\d\d-\d\d |\d\d-\d\d )?\d\d:\d\d:\d\d(?: [A-Z]+\d+)+\] |^\[gpu_id=\d+\] ", re.MULTILINE)
_VLLM_PREFIX = re.compile(
    r"^(?:\(\w[^()]{0,100}\) )?(?:INFO|WARNING|ERROR|DEBUG|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[?[\w.]+\.py:\d+\] ", re.MULTILINE
)
PREFIX_WINDOW = 64 * 1024


def _score(text: str, markers: Markers, prefix: re.Pattern[str], ends: tuple[str, str]) -> int:
    score = sum(weight for weight, words in markers if any(word in text for word in words))
    return score + (3 if any(prefix.search(end) for end in ends) else 0)


def detect_kind(text: str) -> str | None:
    """"sglang", "vllm", or None when neither server's markers are there."""
    ends = (text[:PREFIX_WINDOW], text[-PREFIX_WINDOW:] if len(text) > PREFIX_WINDOW else "")
    sglang = _score(text, _SGLANG_MARKERS, _SGLANG_PREFIX, ends)
    vllm = _score(text, _VLLM_MARKERS, _VLLM_PREFIX, ends)
    if max(sglang, vllm) < 3:
        return None
    return "sglang" if sglang >= vllm else "vllm"


def _parse_unknown(text: str) -> dict[str, Any]:
    # A training job's log is not a server log, but a CUDA OOM or NCCL error in it is news.
    facts = LogFacts("")
    for line in clean_lines(text):
        facts.scan_nccl(line)
        parsed = split_vllm(line)
        if parsed.level or parsed.proc:
            facts.scan_error(parsed.message, parsed.rank, parsed.level)
        else:
            rank, message, level = split_sglang(line)
            facts.scan_error(message, rank or "main", level)
    full = facts.to_dict()
    return {"kind": None, "errors": full["errors"], "nccl_versions": full["nccl_versions"]}


def _parse_raw(kind: str | None, text: str) -> dict[str, Any]:
    if kind == "sglang":
        return _parse_sglang(text)
    if kind == "vllm":
        return _parse_vllm(text)
    return _parse_unknown(text)


def parse_as(kind: str | None, text: str) -> dict[str, Any]:
    return finalize(_parse_raw(kind, text))


def detect_and_parse(text: str) -> dict[str, Any]:
    return parse_as(detect_kind(text), text)


def parse_sglang_log(text: str) -> dict[str, Any]:
    """Facts of the latest SGLang run in ``text`` (any era, any prefix, ranks interleaved)."""
    return finalize(_parse_sglang(text))


def parse_vllm_log(text: str) -> dict[str, Any]:
    """Facts of the latest vLLM run in ``text``."""
    return finalize(_parse_vllm(text))


def parse_log_parts(head: str, tail: str) -> dict[str, Any]:
    """Facts from a log's head and tail read separately (the middle was skipped).

    A tail that starts its own run (an argument line) describes the latest run alone;
    otherwise the tail continues the head's last run: its memory lines, errors, readiness
    and bench figures are added to the head's.
    """
    if not tail:
        return detect_and_parse(head)
    kind = detect_kind(head + "\n" + tail)
    first, last = _parse_raw(kind, head), _parse_raw(kind, tail)
    versions = sorted(set(first["nccl_versions"]) | set(last["nccl_versions"]))
    if kind is None:
        first["errors"] = _merge_errors(first["errors"], last["errors"])
        first["nccl_versions"] = versions
        return first
    if last["runs"]:
        last["nccl_versions"] = versions
        last["runs"] += first["runs"]
        return finalize(last)
    if first.get("ready") or first.get("engine_ready"):  # the tail's exceptions came after start-up
        last["errors"] = [_after_start(e) for e in last["errors"]]
    merged = dict(first)
    merged["memory"] = {rank: dict(values) for rank, values in first["memory"].items()}
    for rank, values in last["memory"].items():
        merged["memory"].setdefault(rank, {}).update(values)
    for key in ("ready", "engine_ready"):
        merged[key] = bool(first.get(key) or last.get(key))
    merged["errors"] = _merge_errors(first["errors"], last["errors"])
    merged["nccl_versions"] = versions
    for key in ("bench", "kv_shortfall"):
        if last.get(key):
            merged[key] = {**(first.get(key) or {}), **last[key]}
    if last.get("mode") == "offline":
        merged["mode"] = "offline"
    for key, value in last.items():  # e.g. vllm_version first seen in the tail
        if merged.get(key) is None and value is not None:
            merged[key] = value
    return finalize(merged)


def _after_start(error: dict[str, Any]) -> dict[str, Any]:
    if error.get("detail") == "startup_exception":
        return {**error, "kind": "other", "detail": "runtime_exception"}
    return error


def _merge_errors(first: list[dict[str, Any]], last: list[dict[str, Any]]) -> list[dict[str, Any]]:
    merged: dict[tuple[str, str, str], dict[str, Any]] = {}
    for entry in first + last:
        key = (entry["kind"], entry.get("detail", ""), entry["message"])
        into = merged.setdefault(key, {**entry, "count": 0, "ranks": [], "mentions": {}})
        into["count"] += entry["count"]
        merge(into["mentions"], entry.get("mentions"))
        into["ranks"] = sorted(set(into["ranks"]) | set(entry.get("ranks", [])), key=rank_order)
    return sorted(merged.values(), key=lambda error: cause_rank(error["kind"]))
