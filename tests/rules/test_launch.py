"""Launch budget: SGLang's and vLLM's KV cache budgets from the logged numbers."""

from __future__ import annotations

from driftwatch.severity import Severity
from tests.rules.builders import SGLANG, VLLM, found, logs, make_snapshot, not_run, processes, server
from tests.seed import seed_log

SG, VL = "kv-budget-sglang", "kv-budget-vllm"


def test_the_seed_incident_is_observed_when_the_log_shows_it() -> None:
    # Relaunched with --mem-fraction-static 0.55: 21.7 − 140.4 × 0.45 < 0, and every rank says so.
    [finding] = found(SG, make_snapshot(logs=logs(seed_log(0.55, fails=True))))
    assert finding.severity is Severity.critical and finding.observed
    assert finding.why.startswith("the KV cache budget is -41.5 GiB (free after weights 21.7 − total 140.4 × (1 − mem_fraction_static 0.55))")
    assert "the log shows it failed: RuntimeError: Not enough memory" in finding.why and "(8×)" in finding.why
    assert "raise --mem-fraction-static above 0.85" in finding.fix
    # The change that produces it is the fraction; the logged errors are its symptoms, not causes.
    assert finding.subjects == (("launch-arg", "mem_fraction_static"),)


def test_a_fraction_set_since_the_good_run_is_predicted() -> None:
    snap = make_snapshot(processes=processes(server(*SGLANG, "--mem-fraction-static", "0.55")),
                         logs=logs(seed_log(0.88, fails=False)))
    [finding] = found(SG, snap)
    assert finding.severity is Severity.critical and not finding.observed and finding.evidence == "predicted"


def test_a_healthy_server_has_no_finding() -> None:
    assert found(SG, make_snapshot(logs=logs(seed_log(0.88, fails=False)))) == []
    # The log's own numbers on a run that reached ready cannot predict its failure.
    assert found(SG, make_snapshot(logs=logs(seed_log(0.55, fails=False)))) == []


def test_without_a_log_the_budget_is_not_computed() -> None:
    assert not_run(SG, make_snapshot()) == "no sglang server log was read"


VLLM_RUN = (
    "INFO 01-11 05:52:49 api_server.py:713] non-default args: {'model': '/models/Llama-3.1-70B', "
    "'tensor_parallel_size': 1, 'gpu_memory_utilization': 0.9, 'max_model_len': 131072}\n"
    "INFO 01-11 05:53:40 worker.py:241] Model loading took 131.5 GiB\n"
    "INFO 01-11 05:54:00 worker.py:241] Available KV cache memory: @KV@ GiB\n"
    "INFO 01-11 05:54:00 kv_cache_utils.py:1] GPU KV cache size: @TOKENS@ tokens\n"
)


def vllm_run(kv: str, tokens: str) -> str:
    return VLLM_RUN.replace("@KV@", kv).replace("@TOKENS@", tokens)


def test_vllm_with_no_memory_left_for_the_cache() -> None:
    text = vllm_run("-2.31", "0") + "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization`.\n"
    findings = found(VL, make_snapshot(logs=logs(text)))
    assert [(f.severity, f.observed) for f in findings] == [(Severity.critical, True), (Severity.high, False)]
    assert "vLLM cannot start with this; the log shows it failed: " in findings[0].why
    assert "Available KV cache memory: -2.31 GiB" in findings[0].why and "would stop" not in findings[0].why
    assert "fewer than one request of the full context length (max_model_len 131,072)" in findings[1].why


def test_vllm_with_a_lower_utilization_set_since_is_predicted() -> None:
    text = vllm_run("5.0", "163840")
    assert found(VL, make_snapshot(logs=logs(text))) == []
    lower = make_snapshot(processes=processes(server(*VLLM, "--gpu-memory-utilization", "0.8")), logs=logs(text))
    [finding] = found(VL, lower)
    assert not finding.observed and "(the log's run had 0.9)" in finding.why and "-9.0 GiB" in finding.why
    assert "it would stop with 'No available memory for the cache blocks'" in finding.why  # predicted, not seen
