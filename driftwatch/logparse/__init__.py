"""Pure parsers for inference-server logs: text in, JSON-safe facts out.

``detect_and_parse`` tells SGLang from vLLM by markers only these servers print, and
``parse_log_parts`` merges the head (where the arguments are) and the tail (where the
errors are) of a log too large to read whole.
"""

from __future__ import annotations

import re
from typing import Any

from driftwatch.logparse.common import COMMON_RULES, LogFacts
from driftwatch.logparse.sglang import parse_sglang_log
from driftwatch.logparse.vllm import parse_vllm_log

__all__ = ["detect_and_parse", "detect_kind", "parse_log_parts", "parse_sglang_log", "parse_vllm_log"]

# (weight, pattern). Old SGLang imported vLLM, so vLLM-style lines can show up in an
# SGLang log: only markers the other server never prints weigh much.
_SGLANG_MARKERS = [
    (5, re.compile(r"server_args=(?:ServerArgs\(|\{)")),
    (3, re.compile(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?: [A-Z]+\d+)+\] ")),
    (3, re.compile(r"Load weight (?:begin|end)\.|KV Cache is allocated\.|Memory pool end\.")),
    (3, re.compile(r"fired up and ready to roll|max_total_num_tokens=|--mem-fraction-static")),
    (1, re.compile(r"sglang")),
]
_VLLM_MARKERS = [
    (5, re.compile(r"non-default args: \{|vLLM API server version|\bargs: Namespace\(")),
    (3, re.compile(r"GPU KV cache size: |Available KV cache memory: |# GPU blocks: ")),
    (3, re.compile(r"LLM engine \(v|gpu_memory_utilization|\(EngineCore(?:_DP\d+)? pid=")),
    (1, re.compile(r"vllm")),
]


def _score(text: str, markers: list[tuple[int, re.Pattern[str]]]) -> int:
    return sum(weight for weight, pattern in markers if pattern.search(text))


def detect_kind(text: str) -> str | None:
    """"sglang", "vllm", or None when neither server's markers are there."""
    sglang, vllm = _score(text, _SGLANG_MARKERS), _score(text, _VLLM_MARKERS)
    if max(sglang, vllm) < 3:
        return None
    return "sglang" if sglang >= vllm else "vllm"


def _parse_unknown(text: str) -> dict[str, Any]:
    # A training job's log is not a server log, but a CUDA OOM or NCCL error in it is news.
    facts = LogFacts("", COMMON_RULES)
    for line in text.splitlines():
        facts.scan_common(line)
    full = facts.to_dict()
    return {"kind": None, "errors": full["errors"], "nccl_versions": full["nccl_versions"]}


def detect_and_parse(text: str) -> dict[str, Any]:
    return parse_as(detect_kind(text), text)


def parse_as(kind: str | None, text: str) -> dict[str, Any]:
    if kind == "sglang":
        return parse_sglang_log(text)
    if kind == "vllm":
        return parse_vllm_log(text)
    return _parse_unknown(text)


def parse_log_parts(head: str, tail: str) -> dict[str, Any]:
    """Facts from a log's head and tail read separately (the middle was skipped).

    A tail that starts its own run (an argument line) describes the latest run alone;
    otherwise the tail continues the head's last run: its memory lines, errors and
    readiness are added to the head's.
    """
    if not tail:
        return detect_and_parse(head)
    kind = detect_kind(head + "\n" + tail)
    first, last = parse_as(kind, head), parse_as(kind, tail)
    if kind is None:
        first["errors"] = _merge_errors(first["errors"], last["errors"])
        first["nccl_versions"] = sorted(set(first["nccl_versions"]) | set(last["nccl_versions"]))
        return first
    if last["runs"]:
        last["nccl_versions"] = sorted(set(first["nccl_versions"]) | set(last["nccl_versions"]))
        last["runs"] += first["runs"]
        return last
    merged = dict(first)
    merged["memory"] = {rank: dict(values) for rank, values in first["memory"].items()}
    for rank, values in last["memory"].items():
        merged["memory"].setdefault(rank, {}).update(values)
    merged["ready"] = first["ready"] or last["ready"]
    merged["errors"] = _merge_errors(first["errors"], last["errors"])
    merged["nccl_versions"] = sorted(set(first["nccl_versions"]) | set(last["nccl_versions"]))
    for key, value in last.items():  # e.g. vllm_version first seen in the tail
        if merged.get(key) is None and value is not None:
            merged[key] = value
    return merged


def _merge_errors(first: list[dict[str, Any]], last: list[dict[str, Any]]) -> list[dict[str, Any]]:
    counts: dict[tuple[str, str], int] = {}
    for entry in first + last:
        key = (entry["kind"], entry["message"])
        counts[key] = counts.get(key, 0) + entry["count"]
    return [{"kind": k, "message": m, "count": c} for (k, m), c in counts.items()]
