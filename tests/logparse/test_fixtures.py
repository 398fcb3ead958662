"""Every real excerpt in tests/fixtures/server-logs (sources in its README): the values the
excerpt states are in the facts, and every error line it prints is recorded with its kind."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from driftwatch.logparse import detect_and_parse, parse_log_parts
from driftwatch.logparse.errors import KINDS

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "server-logs"

# file -> what the excerpt states. "errors": (kind, detail) of every error line, in any order;
# "memory": rank -> figures (a subset of what is recorded); dicts compare as subsets too.
EXPECTED: dict[str, dict[str, Any]] = {
    "vllm-0.4.2-ray-engine.log": {
        "kind": "vllm", "version": "0.4.2", "model": "DeepSeek-V2-Lite-Chat", "parallel": {"tp": 4},
        "memory_fraction": 0.99, "max_seq_len": 1024, "ready": False, "errors": [],
        "engine_config": {"dtype": "torch.bfloat16", "enforce_eager": True, "served_model_name": "DeepSeek-V2-Lite-Chat",
                          "seed": 0, "quantization": None},
        "key_args": {"tensor_parallel_size": 4, "max_model_len": 1024, "model": "DeepSeek-V2-Lite-Chat"},
        "command": {"entry": "vllm.entrypoints.openai.api_server"},
    },
    "vllm-0.4.1-namespace.log": {
        "version": "0.4.1", "server_args_form": "Namespace", "server_args_truncated": True,
        "model": "/data/zhaoxf4/pretrained/meta-llama/Meta-Llama-3-8B-Instruct", "parallel": {"tp": 2, "pp": 1},
        "key_args": {"dtype": "half", "block_size": 16, "enable_prefix_caching": False},
    },
    "vllm-0.4-nccl-load-failure.log": {
        "kind": "vllm", "nccl_library": "libnccl.so.2",
        "errors": [("nccl", "nccl_error"), ("other", "error_record")],
    },
    "vllm-0.4-libnccl-path.log": {"kind": "vllm", "nccl_versions": ["2.18.1"]},
    "vllm-v0-profile-workers.log": {
        "memory_fraction": 0.99,
        "memory": {"pid=507": {"profile_s": 17.59, "total_gpu_memory_gib": 23.58, "usable_memory_gib": 23.35,
                               "profiled_weights_gib": 21.21, "non_torch_memory_gib": 0.2, "activation_peak_gib": 0.37,
                               "kv_cache_reserved_gib": 1.57},
                   "pid=577": {"profile_s": 17.56}, "pid=493": {"profile_s": 17.57},
                   "pid=521": {"kv_cache_reserved_gib": 1.57}},
    },
    "vllm-0.6.4-profiling-results-kv-too-small.log": {
        "memory_fraction": 0.9, "max_seq_len": 29000,
        "memory": {"main": {"model_weights_gb": 14.9888, "total_gpu_memory_gib": 23.58, "initial_memory_usage_gib": 15.34,
                            "peak_torch_memory_gib": 17.98, "memory_usage_post_profile_gib": 15.35,
                            "non_torch_memory_gib": 0.35, "kv_cache_size_gib": 2.89, "gpu_blocks": 1478,
                            "cpu_blocks": 2048, "max_concurrency_x": 0.82, "max_concurrency_tokens": 29000}},
        "kv_shortfall": {"max_seq_len": 29000, "kv_cache_tokens": 23648},
        "errors": [("kv-budget", "kv_cache_too_small")],
    },
    "vllm-0.4-gpu-blocks-zero.log": {
        "model": "/model_repos/CustomLLM/Qwen-7B-QAnything", "max_seq_len": 4096, "parallel": {"tp": 1},
        "memory": {"main": {"gpu_blocks": 0, "cpu_blocks": 256}}, "errors": [("kv-budget", "zero_gpu_blocks")],
    },
    "vllm-v1-0.7-gpu-blocks.log": {
        "model": "neuralmagic/Meta-Llama-3.1-70B-Instruct-quantized.w8a8", "memory_fraction": 0.98, "max_seq_len": 2048,
        "memory": {"main": {"model_weights_gb": 67.7229, "torch_compile_s": 54.73, "gpu_blocks": 1381,
                            "max_concurrency_x": 10.79, "max_concurrency_tokens": 2048}},
    },
    "vllm-v1-0.7-kv-tokens.log": {
        "memory": {"main": {"kv_cache_tokens": 2042016, "max_concurrency_x": 997.08, "max_concurrency_tokens": 2048}},
    },
    "vllm-v1-0.8.3-engine-dp.log": {
        "version": "0.8.3", "engine_generation": "V1", "model": "/mnt/tenant-home_speed/Model/Qwen/Qwen2.5-7B-Instruct",
        "parallel": {"tp": 1, "pp": 1}, "max_seq_len": 102400,
        # the second half of the line, after the paste broke "num_sched" / "uler_steps=1"
        "engine_config": {"enable_prefix_caching": True, "chunked_prefill_enabled": True, "enforce_eager": True},
    },
    "vllm-v0-0.6.4.post2-engine.log": {
        "version": "0.6.4.post2.dev395+g02222a02.d20241217", "engine_generation": "V0", "max_seq_len": 2048,
        "parallel": {"tp": 1, "pp": 1}, "engine_config": {"device_config": "cuda:1", "num_scheduler_steps": 1},
    },
    "vllm-compose-engine-vdev.log": {
        "version": "dev", "parallel": {"tp": 2, "pp": 1}, "max_seq_len": 8192,
        "model": "/models/models--meta-llama--Meta-Llama-3.1-8B-Instruct/snapshots/0e9e39f249a16976918f6564b8830bc894c89659",
    },
    "vllm-v1-negative-kv-engine-start.log": {
        "model": "/vllm-omni/Qwen3-Omni-30B-A3B-Instruct", "headline_rank": "TP0",
        "memory": {"TP1": {"available_kv_cache_gib": -3.86}, "TP0": {"available_kv_cache_gib": 9.9}},
        "errors": [("kv-budget", "negative_kv_memory"), ("engine-start", "engine_failed_to_start")],
    },
    "vllm-dgx-spark-kv-needed.log": {
        "max_seq_len": 196608, "memory": {"main": {"available_kv_cache_gib": 22.5}},
        "kv_shortfall": {"max_seq_len": 196608, "kv_needed_gib": 23.25, "kv_available_gib": 22.5},
        "errors": [("kv-budget", "kv_cache_too_small"), ("kv-budget", "kv_cache_too_small")],
    },
    "vllm-0.7-max-seq-len-too-large.log": {
        "model": "/root/autodl-tmp/deepseek-ai/DeepSeek-R1-Distill-Qwen-14B", "parallel": {"tp": 2},
        "memory_fraction": 0.98, "max_seq_len": 131072, "memory": {"pid=1786": {"model_weights_gb": 13.9476}},
        "kv_shortfall": {"max_seq_len": 131072, "kv_cache_tokens": 81536},
        "errors": [("kv-budget", "kv_cache_too_small"), ("other", "error_record")],
    },
    "vllm-0.9-free-memory-below-utilization.log": {
        "kind": "vllm", "memory_fraction": 0.9,
        "memory": {"main": {"free_on_startup_gib": 67.24, "total_on_startup_gib": 79.25, "requested_memory_gib": 71.33}},
        "errors": [("kv-budget", "startup_memory_below_utilization")],
    },
    "vllm-ascend-no-cache-blocks.log": {"errors": [("kv-budget", "no_kv_memory")]},
    "vllm-ascend-free-memory-summary.log": {
        "memory_fraction": 0.9,
        "memory": {"main": {"free_on_startup_gib": 60.86, "total_on_startup_gib": 61.27, "requested_memory_gib": 55.14,
                            "weights_usage_gib": 1.14, "peak_activation_usage_gib": 0.22,
                            "non_torch_memory_usage_gib": 0.13, "npu_graph_memory_usage_gib": 0.04}},
    },
    "vllm-engine-core-init-failed.log": {"errors": [("engine-start", "engine_failed_to_start")]},
    "vllm-ascend-cann-error.log": {"errors": [("engine-start", "engine_failed_to_start"), ("other", "error_record")]},
    "vllm-python-logging-wrapper.log": {"errors": []},  # frames and a source line only
    "vllm-v1-worker-oom.log": {"errors": [("oom", "cuda_oom")]},
    "vllm-v1-workerproc-hit.log": {
        "memory": {f"rank{r}": {"cuda_graph_gib": 2.28, "graph_capture_s": 78} for r in range(4)},
        "errors": [("engine-start", "startup_exception")],
    },
    "vllm-docker-timestamps.log": {"kind": "vllm", "errors": []},  # a traceback cut before its exception
    "vllm-buildkite-ci.log": {
        "memory": {"main": {"model_weights_gb": 0.2389, "model_load_s": 0.977005}},
        "errors": [("engine-start", "startup_exception")],
    },
    "vllm-rocm-lemonade-hip-oom.log": {"errors": [("oom", "cuda_oom")]},
    "vllm-rocm-glued-records.log": {
        "model": "/model/Qwen3-32B-autoround-4bit-gptq", "parallel": {"tp": 2}, "memory_fraction": 0.9,
        "max_seq_len": 4000, "errors": [("oom", "cuda_oom")],
    },
    "vllm-rocm-strix-hip-oom.log": {"errors": [("oom", "cuda_oom")]},
    "vllm-ascend-caret-ansi-hccl.log": {
        "errors": [("engine-start", "startup_exception"), ("nccl", "nccl_error"), ("other", "error_record"),
                   ("other", "error_record")],
    },
    "vllm-glued-records-one-line.log": {"kind": "vllm", "errors": []},  # frames only
    "vllm-ray-keyerror.log": {"errors": [("other", "exception"), ("other", "error_record")]},
    "vllm-banner-0.19.log": {"version": "0.19.1rc1.dev301+g60995c05b", "model": "google/gemma-4-31B-it"},
    "vllm-v1-0.19-engine.log": {
        "version": "0.19.1rc1.dev241+g4d042ed85.d20260413", "model": "Qwen/Qwen2.5-1.5B-Instruct-AWQ",
        "parallel": {"tp": 1, "pp": 1, "dp": 1}, "max_seq_len": 32768,
        "engine_config": {"quantization": "awq_marlin", "decode_context_parallel_size": 1},
    },
    "vllm-v1-0.8-loading-tp4.log": {
        "parallel": {"tp": 4}, "headline_rank": "rank0",
        "memory": {"rank0": {"weights_load_s": 3.73, "model_weights_gb": 7.3858, "model_load_s": 4.031594},
                   "rank1": {"weights_load_s": 3.71}, "rank2": {"model_load_s": 4.037179}, "rank3": {"weights_load_s": 3.73}},
    },
    "vllm-nccl-version-glued.log": {"nccl_versions": ["2.20.5", "2.20.5+cuda12.4"]},
    "vllm-0.5.2-namespace-wrapped.log": {
        "version": "0.5.2", "parallel": {"tp": 1, "pp": 2}, "memory_fraction": 0.9,
        # after the paste broke "disable_sliding_window=F" / "alse"
        "server_args": {"disable_sliding_window": False, "swap_space": 4, "seed": 0},
    },
    "vllm-v1-0.8.4-engine-tp2.log": {"kind": "vllm", "version": "0.8.4", "parallel": {"tp": 2}, "platform": "cuda"},
    "torch-accelerator-oom.log": {"kind": None, "errors": [("oom", "cuda_oom")]},
    "sglang-2024-custom-allreduce-peer-access.log": {"errors": [("custom-allreduce", "peer_access")]},
    "sglang-custom-allreduce-cudart.log": {
        "kind": "sglang", "parallel": {"tp": 2}, "errors": [("custom-allreduce", "peer_access")],
    },
    "sglang-2024-gpu-id-prefix.log": {
        "kind": "sglang", "model": "Qwen/Qwen2-7B-Instruct", "model_arch": "Qwen2ForCausalLM", "dtype": "torch.bfloat16",
        "parallel": {"tp": 2}, "memory_fraction": 0.7, "headline_rank": "gpu_id=0",
        "memory": {"gpu_id=0": {"avail_mem_after_load_gb": 15.61, "avail_mem_after_pool_gb": 6.12},
                   "gpu_id=1": {"avail_mem_after_load_gb": 15.95, "avail_mem_after_pool_gb": 6.46}},
    },
    "sglang-2024-time-only-bench-latency-rocm.log": {
        "kind": "sglang", "mode": "offline", "ready": True, "model": "meta-llama/Meta-Llama-3-8B-Instruct",
        "command": {"entry": "sglang.bench_latency"}, "headline_rank": "TP0",
        "memory": {"TP0": {"avail_mem_before_load_gb": 191.33, "avail_mem_after_load_gb": 176.33,
                           "avail_mem_after_pool_gb": 22.83},
                   "main": {"max_total_num_tokens": 1256440}},
        "bench": {"prefill_latency_s": 0.25074, "prefill_throughput_tok_s": 32671.13,
                  "decode_median_latency_s": 0.00973, "decode_median_throughput_tok_s": 3289.81,
                  "total_latency_s": 0.553, "total_throughput_tok_s": 16665.96},
        "errors": [("other", "exception")],  # KeyError from the resource tracker at exit
    },
    "sglang-bench-one-batch.log": {
        "kind": "sglang", "mode": "offline", "ready": True,
        "bench": {"prefill_latency_s": 0.01014, "prefill_throughput_tok_s": 5916.43, "batch_size": 1,
                  "decode_median_latency_s": 0.00572, "decode_median_throughput_tok_s": 174.85,
                  "total_latency_s": 0.062, "total_throughput_tok_s": 1122.76},
    },
    "sglang-npu-scheduler-exception.log": {
        "errors": [("engine-start", "child_failed"), ("engine-start", "startup_exception")],
    },
    "sglang-cpu-exception-after-warmup.log": {
        "model_arch": "GPT2LMHeadModel", "max_seq_len": 1024, "engine_ready": True, "ready": False,
        "memory": {"main": {"kv_cache_tokens": 1107402, "k_size_gb": 19.01, "v_size_gb": 19.01, "kv_cache_gb": 38.02,
                            "avail_mem_after_pool_gb": 5.12, "max_total_num_tokens": 1107402,
                            "max_running_requests": 4097, "weight_mem_gb": 0.22, "avail_mem_after_load_gb": 43.24}},
        "errors": [("other", "runtime_exception")],  # the scheduler was up: not a start-up failure
    },
    "sglang-dp-pp-tags.log": {
        "headline_rank": "DP0 PP0",
        "memory": {"DP0 PP0": {"avail_mem_after_load_gb": 14.53, "weight_mem_gb": 7.21},
                   "DP1 PP1": {"avail_mem_before_graph_gb": 8.73}},
    },
    "sglang-midline-alloc-req-slots.log": {"kind": "sglang", "errors": [("kv-budget", "token_pool_exhausted")]},
    "sglang-2024-modeltpserver-exception.log": {"kind": "sglang", "errors": [("engine-start", "startup_exception")]},
    "sglang-compose-memory-pool-oom.log": {"kind": "sglang", "errors": [("oom", "cuda_oom")]},
    "sglang-jax-tqdm-glued.log": {"kind": "sglang", "errors": []},
    "sglang-os-error-cannot-allocate.log": {
        "model": "/data00/models/DeepSeek-R1/", "parallel": {"tp": 8}, "memory_fraction": 0.9, "max_seq_len": 131072,
        "errors": [("other", "exception")],
    },
    "sglang-nccl-version.log": {
        "nccl_versions": ["2.27.3"], "parallel": {"tp": 2},
        "memory": {"TP0": {"dist_init_mem_gb": 1.01}, "TP1": {"dist_init_mem_gb": 1.01}},
    },
    "sglang-untagged-init.log": {"memory": {"main": {"dist_init_mem_gb": 0.0, "avail_mem_before_load_gb": 46.81}}},
    # NCCL's own WARN lines: /dev/shm too small for its shared-memory transport (a container's 64 MB).
    # The segments' random names are one name, so one failure on many ranks is one error.
    "nccl-tests-shm-extend-failed.log": {
        "kind": None, "errors": [("nccl", "nccl_shm"), ("nccl", "nccl_shm")],
        "mentions": {"NCCL WARN Error: failed to extend /dev/shm/nccl-XXXXXX to 5967876 bytes":
                     {"paths": ["/dev/shm/nccl-XXXXXX"]}},
    },
    "nccl-shm-no-space-ci.log": {"kind": None, "errors": [("nccl", "nccl_shm"), ("nccl", "nccl_shm")]},
    "nccl-posix-fallocate.log": {"kind": None, "errors": [("nccl", "nccl_shm")]},
    "vllm-ray-worker-nccl-shm.log": {"kind": "vllm", "errors": [("nccl", "nccl_shm"), ("nccl", "nccl_shm")]},
    "triton-out-of-resources-shared-memory.log": {
        "errors": [("other", "triton_out_of_resources")],
        "mentions": {"triton.runtime.errors.OutOfResources: out of resource: shared memory,": {
            "modules": ["triton.runtime.jit", "triton.compiler.compiler"],
            "paths": ["/home/lucaskabela/.conda/envs/helion/lib/python3.12/site-packages/triton/compiler/compiler.py"],
            "errors": ["triton.runtime.errors.OutOfResources"]}},
    },
    "ray-unhandled-error.log": {
        "errors": [("other", "ray_unhandled_error"), ("other", "exception")],
        "mentions": {"Unhandled error (suppress with 'RAY_IGNORE_UNHANDLED_ERRORS=1'): ray::raise_error() "
                     "(pid=55178, ip=127.0.0.1)": {"env": ["RAY_IGNORE_UNHANDLED_ERRORS"]}},
    },
    "sglang-detokenizer-hit-exception.log": {"kind": "sglang", "errors": [("engine-start", "startup_exception")]},
    # The error points at its cause: both libraries, the symbol and its version, torch's frame.
    "torch-undefined-symbol-nvjitlink.log": {
        "errors": [("other", "exception")],
        "mentions": {
            "ImportError: /home/dp/anaconda3/envs/ComfyUI/lib/python3.11/site-packages/torch/lib/../../nvidia/cusparse/"
            "lib/libcusparse.so.12: undefined symbol: __nvJitLinkComplete_12_4, version libnvJitLink.so.12": {
                "libraries": ["libcusparse.so.12", "libnvJitLink.so.12"], "symbols": ["__nvJitLinkComplete_12_4"],
                "modules": ["torch"], "errors": ["ImportError"],
                "paths": ["/home/dp/anaconda3/envs/ComfyUI/lib/python3.11/site-packages/torch/__init__.py",
                          "/home/dp/anaconda3/envs/ComfyUI/lib/python3.11/site-packages/nvidia/cusparse/lib/"
                          "libcusparse.so.12"]}},
    },
}  # fmt: skip


def check(facts: dict[str, Any], expected: dict[str, Any]) -> None:
    for key, want in expected.items():
        if key == "errors":
            got = sorted((e["kind"], e["detail"]) for e in facts["errors"])
            assert got == sorted(want), got
        elif key == "mentions":  # error message -> what it names
            by_message = {e["message"]: e["mentions"] for e in facts["errors"]}
            assert {message: by_message.get(message) for message in want} == want
        elif key == "memory":
            for rank, values in want.items():
                assert {k: facts["memory"][rank].get(k) for k in values} == values, rank
        elif isinstance(want, dict):
            assert {k: (facts.get(key) or {}).get(k) for k in want} == want, key
        else:
            assert facts.get(key) == want, key


def test_every_fixture_has_expectations_and_a_source() -> None:
    files = sorted(path.name for path in FIXTURES.glob("*.log"))
    assert files == sorted(EXPECTED)
    readme = (FIXTURES / "README.md").read_text()
    assert all(f"`{name}` | https://github.com/" in readme for name in files)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture(name: str) -> None:
    text = (FIXTURES / name).read_text()
    facts = detect_and_parse(text)
    check(facts, EXPECTED[name])
    assert all(e["kind"] in KINDS and e["message"] for e in facts["errors"])
    json.dumps(facts, allow_nan=False)
    # Read as the probe reads a big file (head and tail apart), the same facts come out.
    middle = text.find("\n", len(text) // 2) + 1
    if 0 < middle < len(text):
        parts = parse_log_parts(text[:middle], text[middle:])
        assert sorted((e["kind"], e["detail"]) for e in parts["errors"]) == sorted(
            (e["kind"], e["detail"]) for e in facts["errors"]
        )


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_with_crlf_and_indentation(name: str) -> None:
    # The same paste from a Windows clipboard, indented as a markdown code block.
    text = (FIXTURES / name).read_text()
    pasted = "".join("    " + line + "\r\n" for line in text.splitlines())
    check(detect_and_parse(pasted), EXPECTED[name])
