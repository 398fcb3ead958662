"""Launch commands pasted or echoed into a log: what the server was asked for."""

from __future__ import annotations

import pytest

from driftwatch.logparse.cmdline import is_command, parse_command

COMMANDS = [
    # (line, entry, model, args subset) — real command lines from the fixtures' issues
    (("(.venv) a@b:~/x$ CUDA_VISIBLE_DEVICES=6,7 python -m vllm.entrypoints.openai.api_server --model /data/models/Q "
     "--host 0.0.0.0 --port 8000 --tensor-parallel-size 2"),
     "vllm.entrypoints.openai.api_server", "/data/models/Q", {"tensor_parallel_size": 2, "port": 8000}),
    (("python3 -m sglang.launch_server --model /path/to/Qwen3-235B-A22B-FP8 --tp 4 --trust-remote-code --host 0.0.0.0 "
     "--port 8000 --mem-fraction-static 0.93"),
     "sglang.launch_server", "/path/to/Qwen3-235B-A22B-FP8", {"tp_size": 4, "mem_fraction_static": 0.93,
                                                              "trust_remote_code": True}),
    ("vllm serve --trust-remote-code --tensor_parallel_size 2 --gpu_memory_utilization=0.98  /root/m",
     "vllm serve", "/root/m", {"tensor_parallel_size": 2, "gpu_memory_utilization": 0.98}),
    (("I execute :python -m sglang.launch_server --model-path Qwen/Qwen2-7B-Instruct  --tp 2 --mem-fraction-static 0.7  "
     "--enable-p2p-check --host 0.0.0.0 --port 8000    follow error:"),
     "sglang.launch_server", "Qwen/Qwen2-7B-Instruct", {"tp_size": 2, "port": 8000}),
    (("Run `python -m sglang.launch_server --served-model-name=qwen --model=./Qwen2.5-0.5B-Instruct "
     "--tensor-parallel-size=2` on 8*4090 Node."), "sglang.launch_server", "./Qwen2.5-0.5B-Instruct", {"tp_size": 2}),
    ("python -m sglang.bench_latency --model-path meta-llama/Meta-Llama-3-8B-Instruct --batch 32 --input-len 256",
     "sglang.bench_latency", "meta-llama/Meta-Llama-3-8B-Instruct", {"batch": 32, "input_len": 256}),
    (("python benchmarks/benchmark_throughput.py --backend vllm --model meta-llama/Llama-2-7b-chat-hf -tp 4 "
     "--quantization fp8"), "benchmark_throughput.py", "meta-llama/Llama-2-7b-chat-hf",
     {"tensor_parallel_size": 4, "quantization": "fp8"}),
    ("python -m sglang.launch_server --model-path m --cuda-graph-bs 1 2 4 2>&1 | tee server.log",
     "sglang.launch_server", "m", {"cuda_graph_bs": [1, 2, 4]}),
]  # fmt: skip


@pytest.mark.parametrize(("line", "entry", "model", "args"), COMMANDS)
def test_pasted_commands(line: str, entry: str, model: str, args: dict) -> None:
    assert is_command(line)
    parsed = parse_command(line)
    assert parsed is not None
    assert parsed["entry"].endswith(entry) and parsed["model"] == model
    assert {key: parsed["args"].get(key) for key in args} == args


@pytest.mark.parametrize("line", ["pip install vllm", ("INFO 04-17 17:24:45 [__init__.py:239] Automatically detected "
                                  "platform cuda."), "see sglang docs", "python -m sglang.check_env"])
def test_not_a_launch_command(line: str) -> None:
    assert not is_command(line) or parse_command(line) is None
