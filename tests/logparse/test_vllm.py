"""The vLLM log parser over logs composed from real vLLM lines of each era."""

from __future__ import annotations

import json

import pytest

from driftwatch.logparse import detect_and_parse, detect_kind, parse_vllm_log

# V1 engine (0.11), TP2, started by `vllm serve`: non-default args dict, per-worker lines.
V1_GOOD = """\
INFO 11-03 05:51:40 [__init__.py:216] Automatically detected platform cuda.
(APIServer pid=5385) INFO 11-03 05:51:44 [api_server.py:1839] vLLM API server version 0.11.0
(APIServer pid=5385) INFO 11-03 05:51:44 [utils.py:233] non-default args: {'model_tag': '/models/Qwen3-8B', 'port': 8005, \
'model': '/models/Qwen3-8B', 'trust_remote_code': True, 'dtype': 'bfloat16', 'max_model_len': 32768, \
'served_model_name': ['qwen3'], 'tensor_parallel_size': 2, 'gpu_memory_utilization': 0.85, \
'lora_modules': [LoRAModulePath(name='a', path='/p', base_model_name=None)], 'enable_prefix_caching': False}
(EngineCore_DP0 pid=5600) INFO 11-03 05:52:01 [core.py:77] Initializing a V1 LLM engine (v0.11.0) with config: \
model='/models/Qwen3-8B', speculative_config=None, tokenizer='/models/Qwen3-8B', dtype=torch.bfloat16
(Worker_TP0 pid=5700) INFO 11-03 05:52:05 [pynccl.py:70] vLLM is using nccl==2.27.3
(Worker_TP0 pid=5700) INFO 11-03 05:52:06 [cuda.py:362] Using Flash Attention backend on V1 engine.
(Worker_TP0 pid=5700) INFO 11-03 05:52:10 [gpu_model_runner.py:2653] Model loading took 7.6 GiB and 12.3 seconds
(Worker_TP1 pid=5701) INFO 11-03 05:52:10 [gpu_model_runner.py:2653] Model loading took 7.6 GiB and 12.1 seconds
(Worker_TP0 pid=5700) INFO 11-03 05:52:30 [gpu_worker.py:298] Available KV cache memory: 58.61 GiB
(Worker_TP1 pid=5701) INFO 11-03 05:52:30 [gpu_worker.py:298] Available KV cache memory: 58.59 GiB
(EngineCore_DP0 pid=5600) INFO 11-03 05:52:31 [kv_cache_utils.py:1087] GPU KV cache size: 853,472 tokens
(EngineCore_DP0 pid=5600) INFO 11-03 05:52:31 [kv_cache_utils.py:1091] Maximum concurrency for 32,768 tokens per request: 26.05x
(Worker_TP0 pid=5700) INFO 11-03 05:52:45 [gpu_model_runner.py:3480] Graph capturing finished in 12 secs, took 0.58 GiB
(APIServer pid=5385) INFO 11-03 05:52:50 [api_server.py:1971] Starting vLLM API server 0 on http://0.0.0.0:8005
(APIServer pid=5385) INFO:     Started server process [5385]
(APIServer pid=5385) INFO:     Application startup complete.
"""

V1_NO_MEMORY = """\
(APIServer pid=1) INFO 10-08 20:33:20 [utils.py:233] non-default args: {'model': '/models/Qwen3-8B', \
'gpu_memory_utilization': 0.3, 'max_model_len': 40960}
(EngineCore_DP0 pid=18799) INFO 10-08 20:33:40 [gpu_model_runner.py:2653] Model loading took 15.27 GiB and 9.1 seconds
(EngineCore_DP0 pid=18799) INFO 10-08 20:33:47 [gpu_worker.py:298] Available KV cache memory: -0.3 GiB
(EngineCore_DP0 pid=18799) ERROR 10-08 20:33:48 [core.py:708] EngineCore failed to start.
(EngineCore_DP0 pid=18799) ERROR 10-08 20:33:48 [core.py:708] Traceback (most recent call last):
(EngineCore_DP0 pid=18799) ERROR 10-08 20:33:48 [core.py:708]   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/core/kv_cache_utils.py", line 545, in check_enough_kv_cache_memory
(EngineCore_DP0 pid=18799) ERROR 10-08 20:33:48 [core.py:708] ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.
"""

# V0 era (0.6): `args: Namespace(...)`, "# GPU blocks", the memory-profiling summary.
V0_NAMESPACE = """\
INFO 09-08 10:17:29 api_server.py:495] vLLM API server version 0.6.0
INFO 09-08 10:17:29 api_server.py:496] args: Namespace(model_tag='OpenGVLab/InternVL2-40B', config='', host=None, \
port=8000, uvicorn_log_level='info', allow_credentials=False, allowed_origins=['*'], api_key=None, \
lora_modules=[LoRAModulePath(name='mistral-7', path='/loras/m7', base_model_name=None)], middleware=[], \
model='OpenGVLab/InternVL2-40B', tokenizer=None, dtype='bfloat16', kv_cache_dtype='auto', max_model_len=6000, \
tensor_parallel_size=1, pipeline_parallel_size=4, block_size=16, swap_space=4, gpu_memory_utilization=0.9, \
enforce_eager=True, max_num_seqs=256, quantization=None, ssl_cert_reqs=0)
INFO 09-08 10:19:40 model_runner.py:1025] Loading model weights took 19.2315 GB
INFO 09-08 10:20:01 worker.py:262] Memory profiling takes 5.04 seconds
INFO 09-08 10:20:01 worker.py:262] the current vLLM instance can use total_gpu_memory (79.15GiB) x gpu_memory_utilization (0.90) = 71.24GiB
INFO 09-08 10:20:01 worker.py:262] model weights take 19.23GiB; non_torch_memory takes 0.13GiB; PyTorch activation peak memory takes 1.23GiB; the rest of the memory reserved for KV Cache is 50.65GiB.
INFO 09-08 10:20:02 distributed_gpu_executor.py:57] # GPU blocks: 7803, # CPU blocks: 3276
INFO 09-08 10:20:02 distributed_gpu_executor.py:61] Maximum concurrency for 6000 tokens per request: 20.81x
INFO 09-08 10:20:40 api_server.py:228] vLLM to use /tmp/tmpabc as PROMETHEUS_MULTIPROC_DIR
INFO:     Application startup complete.
"""


def test_v1_good_run() -> None:
    facts = detect_and_parse(V1_GOOD)
    assert facts["kind"] == "vllm" == detect_kind(V1_GOOD)
    assert facts["server_args_form"] == "non-default" and not facts["server_args_truncated"]
    assert facts["gpu_memory_utilization"] == 0.85 and facts["vllm_version"] == "0.11.0"
    assert facts["key_args"] == {
        "model": "/models/Qwen3-8B", "dtype": "bfloat16", "max_model_len": 32768, "tensor_parallel_size": 2,
        "gpu_memory_utilization": 0.85, "enable_prefix_caching": False,
    }  # fmt: skip
    assert facts["server_args"]["lora_modules"] == "[LoRAModulePath(name='a', path='/p', base_model_name=None)]"
    assert facts["memory"] == {
        "TP0": {"model_weights_gib": 7.6, "model_load_s": 12.3, "available_kv_cache_gib": 58.61, "cuda_graph_gib": 0.58,
                "graph_capture_s": 12},
        "TP1": {"model_weights_gib": 7.6, "model_load_s": 12.1, "available_kv_cache_gib": 58.59},
        "DP0": {"kv_cache_tokens": 853472, "max_concurrency_x": 26.05, "max_concurrency_tokens": 32768},
    }  # fmt: skip
    assert facts["engine_generation"] == "V1" and facts["engine_config"]["dtype"] == "torch.bfloat16"
    assert facts["headline_rank"] == "TP0" and facts["parallel"] == {"tp": 2}
    assert facts["attention_backend"] == "Flash Attention"
    assert facts["ready"] is True and facts["errors"] == [] and facts["nccl_versions"] == ["2.27.3"]
    json.dumps(facts, allow_nan=False)


def test_v1_no_memory_for_cache_blocks() -> None:
    facts = parse_vllm_log(V1_NO_MEMORY)
    assert facts["gpu_memory_utilization"] == 0.3 and facts["ready"] is False
    assert facts["memory"]["DP0"]["available_kv_cache_gib"] == -0.3
    assert facts["errors"][1]["mentions"]["modules"] == ["vllm.v1.core.kv_cache_utils"]
    assert [{k: v for k, v in e.items() if k != "mentions"} for e in facts["errors"]] == [  # the likely causes first
        {"kind": "kv-budget", "detail": "negative_kv_memory", "count": 1, "ranks": ["DP0"],
         "message": "Available KV cache memory: -0.3 GiB"},
        {"kind": "kv-budget", "detail": "no_kv_memory", "count": 1, "ranks": ["DP0"],
         "message": "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` "
                    "when initializing the engine."},
        {"kind": "engine-start", "detail": "engine_failed_to_start", "count": 1, "ranks": ["DP0"],
         "message": "EngineCore failed to start."},
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("kind", "detail", "line"),
    [
        ("kv-budget", "no_kv_memory", "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine."),
        ("kv-budget", "kv_cache_too_small", "ValueError: To serve at least one request with the models's max seq len (40960), (10.00 GiB KV cache is needed, which is larger than the available KV cache memory (1.25 GiB). Based on the available memory,  Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."),
        ("kv-budget", "kv_cache_too_small", "ValueError: The model's max seq len (32768) is larger than the maximum number of tokens that can be stored in KV cache (21424). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."),
        ("kv-budget", "kv_cache_too_small", "InsufficientKVCacheMemoryError: Insufficient memory for KV cache to serve requests."),
        ("kv-budget", "startup_memory_below_utilization", "ValueError: Free memory on device (6.92/8.0 GiB) on startup is less than desired GPU memory utilization (0.9, 7.2 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes."),
        ("oom", "cuda_oom", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 224.00 MiB. GPU 0 has a total capacity of 23.55 GiB"),
        ("nccl", "nccl_error", "RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)"),
    ],
)  # fmt: skip
@pytest.mark.parametrize(
    "prefix",
    ["", "(EngineCore_DP0 pid=18799) ERROR 10-08 20:33:48 [core.py:708] ", "(Worker pid=2730) ERROR [multiproc_executor.py:912] "],
)
def test_every_error_variant(kind: str, detail: str, line: str, prefix: str) -> None:
    errors = parse_vllm_log(prefix + line)["errors"]
    assert [(e["kind"], e["detail"], e["count"]) for e in errors] == [(kind, detail, 1)]
    assert errors[0]["message"] == line[:300]


def test_v0_namespace_form() -> None:
    facts = detect_and_parse(V0_NAMESPACE)
    assert facts["kind"] == "vllm" and facts["server_args_form"] == "Namespace"
    args = facts["server_args"]
    assert args["allowed_origins"] == ["*"] and args["host"] is None and args["middleware"] == []
    assert args["lora_modules"] == "[LoRAModulePath(name='mistral-7', path='/loras/m7', base_model_name=None)]"
    assert facts["key_args"]["pipeline_parallel_size"] == 4 and facts["key_args"]["enforce_eager"] is True
    assert facts["gpu_memory_utilization"] == 0.9 and facts["gpu_memory_utilization_profiled"] == 0.9
    assert facts["vllm_version"] == "0.6.0" and facts["ready"] is True
    assert facts["memory"] == {"main": {
        "model_weights_gb": 19.2315, "profile_s": 5.04, "total_gpu_memory_gib": 79.15, "usable_memory_gib": 71.24,
        "profiled_weights_gib": 19.23, "non_torch_memory_gib": 0.13, "activation_peak_gib": 1.23,
        "kv_cache_reserved_gib": 50.65, "gpu_blocks": 7803, "cpu_blocks": 3276, "max_concurrency_x": 20.81,
        "max_concurrency_tokens": 6000,
    }}  # fmt: skip


def test_default_utilization_comes_from_the_profiler_line() -> None:
    text = V0_NAMESPACE.replace("gpu_memory_utilization=0.9, ", "").replace("(0.90)", "(0.92)")
    facts = parse_vllm_log(text)
    assert "gpu_memory_utilization" not in facts["server_args"] and facts["gpu_memory_utilization"] == 0.92


def test_sglang_log_with_vllm_style_lines_is_sglang() -> None:
    text = (
        "[2024-11-25 00:47:11 TP0] Init torch distributed begin.\n"
        "INFO 11-25 00:47:16 config.py:107] Replacing legacy 'type' key with 'rope_type'\n"
        "[2024-11-25 00:47:16 TP0] Load weight begin. avail mem=77.17 GB\n"
    )
    assert detect_kind(text) == "sglang"
    assert detect_and_parse(text)["memory"] == {"TP0": {"avail_mem_before_load_gb": 77.17}}
