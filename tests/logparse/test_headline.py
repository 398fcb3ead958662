"""What show and the diff print for one log: the headline lines, from the facts only."""

from __future__ import annotations

from pathlib import Path

from driftwatch.logparse import detect_and_parse, summarize_log
from tests.logparse.test_vllm import V0_NAMESPACE, V1_GOOD
from tests.seed import seed_log

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "server-logs"


def lines_of(name: str) -> list[str]:
    return summarize_log(detect_and_parse((FIXTURES / name).read_text()))


def test_kv_cache_smaller_than_max_seq_len() -> None:
    assert lines_of("vllm-0.7-max-seq-len-too-large.log") == [
        ("vLLM, model /root/autodl-tmp/deepseek-ai/DeepSeek-R1-Distill-Qwen-14B, TP 2: "
        "KV cache 81,536 tokens < max seq len 131,072"),
        "gpu_memory_utilization 0.98; weights 13.95 GB; KV cache 81,536 tokens",
        ("not ready: kv-budget error: ValueError: The model's max seq len (131072) is larger than the maximum number of "
        "tokens that can be stored in KV cache (81536). Try increasing `gpu_memory_utilization` or decreasing "
        "`max_model_len` when initializing the engine.; 1 more error(s)"),
    ]


def test_kv_cache_smaller_than_needed_in_gib() -> None:
    assert lines_of("vllm-dgx-spark-kv-needed.log")[0] == "vLLM: KV cache 22.5 GiB < 23.25 GiB needed for max seq len 196,608"


def test_good_vllm_run() -> None:
    assert summarize_log(detect_and_parse(V1_GOOD)) == [
        "vLLM 0.11.0, model /models/Qwen3-8B, TP 2",
        ("gpu_memory_utilization 0.85; weights 7.6 GiB; KV cache 853,472 tokens (58.61 GiB); max concurrency 26.05x; "
        "CUDA graphs 0.58 GiB"),
        "ready",
        "NCCL 2.27.3",
    ]


def test_v0_run_with_gpu_blocks() -> None:
    lines = summarize_log(detect_and_parse(V0_NAMESPACE))
    assert lines[0] == "vLLM 0.6.0, model OpenGVLab/InternVL2-40B, TP 1 PP 4"
    assert lines[1] == ("gpu_memory_utilization 0.9; total 79.15 GiB; weights 19.23 GB; KV cache 50.65 GiB; "
                        "GPU blocks 7,803; max concurrency 20.81x")  # fmt: skip


def test_sglang_failure_names_the_root_cause_first() -> None:
    # The scheduler's "hit an exception" comes first in the log; the KV budget is why.
    assert summarize_log(detect_and_parse(seed_log(0.55, fails=True))) == [
        "SGLang, model /models/DeepSeek-V3, TP 8",
        "mem_fraction_static 0.55; free before weights 93.43 GB; weights 71.73 GB; free after weights 21.7 GB",
        ("not ready: kv-budget error (8×): RuntimeError: Not enough memory. Please try to increase "
        "--mem-fraction-static.; 2 more error(s)"),
    ]


def test_offline_bench_and_platform() -> None:
    lines = lines_of("sglang-2024-time-only-bench-latency-rocm.log")
    assert lines[0] == "SGLang, model meta-llama/Meta-Llama-3-8B-Instruct, offline run"
    assert lines[2].startswith("ready: other error: KeyError")  # the bench ran; a warning at exit
    assert lines[3].startswith("bench: prefill_latency_s 0.25")


def test_a_log_without_errors_or_figures_says_so() -> None:
    assert lines_of("vllm-v1-0.8.4-engine-tp2.log") == [
        "vLLM 0.8.4, model /home/users/tim.zhu/alphadrive/Qwen2.5-VL-7b, TP 2", "not ready (no error in the log)"]


def test_not_a_server_log_and_a_probe_error() -> None:
    assert summarize_log(detect_and_parse("step 1 loss 2.0\n")) == ["not an SGLang or vLLM log"]
    assert summarize_log({"path": "/data/x.log", "error": "permission denied"}) == ["/data/x.log: permission denied"]


def test_headline_is_tp0_first() -> None:
    facts = detect_and_parse(seed_log(0.88, fails=False))
    assert facts["headline_rank"] == "TP0" and facts["headline"]["max_total_num_tokens"] == 161792
    assert facts["parallel"] == {"tp": 8, "pp": 1} and facts["memory_fraction"] == 0.88
    assert facts["max_seq_len"] == 163840 and facts["model"] == "/models/DeepSeek-V3"
