"""Launch budget: the KV cache a server can size from the memory numbers its log printed.

SGLang: ``free after weights − total × (1 − mem_fraction_static)`` (``facts/launch.py``).
vLLM: ``total × gpu_memory_utilization − weights − activation peak``, which vLLM logs as
the available KV cache memory; with a utilization set since, the difference is added.
A negative budget is *predicted* until the log shows the server failed.
"""

from __future__ import annotations

import math
from typing import Any

from driftwatch.facts import fmt
from driftwatch.severity import Severity
from driftwatch.facts.read import as_dict
from driftwatch.facts.launch import (
    avail_after_weights_gib,
    launch_settings,
    memory_failure,
    reached_ready,
    sglang_kv_budget,
    total_gib,
)
from driftwatch.rules.finding import Finding
from driftwatch.rules.host import Host, Missing

SGLANG_MEMORY = "https://docs.sglang.ai/advanced_features/server_arguments.html#memory-and-scheduling"
VLLM_MEMORY = "https://docs.vllm.ai/en/latest/configuration/conserving_memory.html"
KV_TOO_SMALL = "kv_cache_too_small"


def sglang_budget(host: Host) -> list[Finding]:
    _kind_logged(host, "sglang")
    avail, total = avail_after_weights_gib(host.snapshot), _total(host)
    value, source = launch_settings(host.snapshot).get("mem_fraction_static", (None, ""))
    fraction = fmt.number(value)
    if avail is None or fraction is None:
        raise Missing("the SGLang log shows no free memory after weights, or no mem_fraction_static")
    budget = sglang_kv_budget(avail, total, fraction)
    failure = memory_failure(host.snapshot)
    # The log's own fraction on a run that reached ready: the numbers cannot be this run's
    # (or SGLang sized them otherwise); only a fraction set since is a prediction.
    contradicted = source == "log" and reached_ready(host.snapshot) and failure is None
    findings = []
    if budget < 0 and not contradicted:
        findings.append(Finding(
            severity=Severity.critical,
            why=f"the KV cache budget is {budget:.1f} GiB (free after weights {avail:.1f} − total {total:.1f} × "
                f"(1 − mem_fraction_static {fraction:g})): SGLang cannot start with this"
                + (f"; the log shows it failed: {failure}" if failure else ""),
            fix=f"raise --mem-fraction-static above {1 - avail / total:.2f} (or unset it to let SGLang choose), "
                "or free GPU memory",
            reference=SGLANG_MEMORY,
            subjects=(("launch-arg", "mem_fraction_static"),),
            key="kv-budget",
            observed=failure is not None,
            # The launch diff's line for the fraction computes this budget and quotes the
            # failure itself: tied to it, the finding adds only its fix, never the same twice.
            restates=(("launch-arg", "mem_fraction_static"),),
        ))
    findings += _context_fit(host, "context_length", "sglang")
    return findings


def vllm_budget(host: Host) -> list[Finding]:
    logs = _kind_logged(host, "vllm")
    kv = _min_rank(logs, "available_kv_cache_gib", "kv_cache_reserved_gib")
    logged_util = next((fmt.number(log.get("gpu_memory_utilization")) for log in logs
                        if fmt.number(log.get("gpu_memory_utilization")) is not None), None)
    if kv is None:
        raise Missing("the vLLM log shows no available KV cache memory")
    util = fmt.number(host.launch().get("gpu_memory_utilization"))
    budget, since = kv, ""
    if util is not None and logged_util is not None and abs(util - logged_util) > 1e-9:
        total = _total(host)
        budget = kv + total * (util - logged_util)
        since = f" with --gpu-memory-utilization {util:g} (the log's run had {logged_util:g})"
    failure = memory_failure(host.snapshot)
    findings = []
    if budget <= 0:
        findings.append(Finding(
            severity=Severity.critical,
            why=f"the KV cache budget is {budget:.1f} GiB{since} (total × gpu_memory_utilization − weights − "
                "activation peak): vLLM cannot start with this"
                + (f"; the log shows it failed: {failure}" if failure
                   else " (it would stop with 'No available memory for the cache blocks')"),
            fix="raise --gpu-memory-utilization, lower --max-num-seqs or --max-model-len, or free GPU memory",
            reference=VLLM_MEMORY,
            subjects=(("launch-arg", "gpu_memory_utilization"),),
            key="kv-budget",
            observed=failure is not None,
        ))
    findings += _context_fit(host, "max_model_len", "vllm")
    return findings


def _context_fit(host: Host, field: str, kind: str) -> list[Finding]:
    """The KV cache holds fewer tokens than one request of the full context length set for
    the server: vLLM refuses to start; SGLang cannot serve such a request."""
    logs = [log for log in host.logs() if log.get("kind") == kind]
    tokens = _min_rank(logs, "max_total_num_tokens", "kv_cache_tokens")
    context = fmt.number(host.launch().get(field))
    if tokens is None or context is None or tokens >= context:
        return []
    # Older logs stored the finer name as the kind; newer ones keep it as the detail.
    errors = {as_dict(e).get(k) for log in logs for e in log.get("errors") or [] for k in ("kind", "detail")}
    return [Finding(
        severity=Severity.high if kind == "vllm" else Severity.medium,
        why=f"the KV cache holds {tokens:,.0f} tokens, fewer than one request of the full context length "
            f"({field} {context:,.0f})" + (": the log shows the server refused to start" if KV_TOO_SMALL in errors else
                                             ": long requests cannot be served"),
        fix=f"lower --{field.replace('_', '-')} to at most {tokens:,.0f}, or give the KV cache more memory",
        reference=SGLANG_MEMORY if kind == "sglang" else VLLM_MEMORY,
        subjects=(("launch-arg", field), *(("log", f"{log.get('path')}: kv cache") for log in logs)),
        key=f"context-fit {field}",
        observed=KV_TOO_SMALL in errors,
    )]


def world_size(host: Host) -> int | None:
    """GPUs the server needs on this host: TP × PP × DP (DP attention shares the TP GPUs)."""
    settings = host.launch()
    tp = _first(settings, "tp_size", "tensor_parallel_size")
    if tp is None:
        return None
    pp = _first(settings, "pp_size", "pipeline_parallel_size") or 1
    dp = _first(settings, "dp_size", "data_parallel_size") or 1
    if settings.get("enable_dp_attention") is True:
        dp = 1
    nnodes = _first(settings, "nnodes") or 1
    return max(1, math.ceil(tp * pp * dp / nnodes))


def _kind_logged(host: Host, kind: str) -> list[dict[str, Any]]:
    logs = [log for log in host.logs() if log.get("kind") == kind]
    if not logs:
        raise Missing(f"no {kind} server log was read")
    return logs


def _total(host: Host) -> float:
    host.gpus()
    total = total_gib(host.snapshot)
    if total is None:
        raise Missing("nvidia-smi reported no GPU memory total")
    return total


def _min_rank(logs: list[dict[str, Any]], *keys: str) -> float | None:
    values = []
    for log in logs:
        for rank in as_dict(log.get("memory")).values():
            value = next((fmt.number(as_dict(rank).get(k)) for k in keys if fmt.number(as_dict(rank).get(k)) is not None), None)
            if value is not None:
                values.append(value)
    return min(values) if values else None


def _first(settings: dict[str, Any], *keys: str) -> float | None:
    return next((fmt.number(settings[k]) for k in keys if fmt.number(settings.get(k)) is not None), None)
