"""Launch-argument normalisation for the SGLang and vLLM launch forms."""

from __future__ import annotations

from typing import Any

import pytest

from driftwatch.launchargs import find_entry, parse_launch_args

PY = "/root/ml-env/bin/python3"


@pytest.mark.parametrize(
    ("argv", "kind", "entry"),
    [
        (["python", "-m", "sglang.launch_server", "--model-path", "/m"], "sglang", "sglang.launch_server"),
        (["python3", "-u", "-m", "vllm.entrypoints.openai.api_server", "--model", "m"], "vllm",
         "vllm.entrypoints.openai.api_server"),
        (["/usr/bin/python3", "/src/sglang/python/sglang/launch_server.py", "--port", "1"], "sglang", "sglang.launch_server"),
        ([PY, "/root/ml-env/bin/sglang", "serve", "--model-path", "/m"], "sglang", "sglang serve"),
        (["sglang", "serve", "--model-path", "/m"], "sglang", "sglang serve"),
        (["/opt/venv/bin/vllm", "serve", "meta-llama/Llama-3.1-8B"], "vllm", "vllm serve"),
        (["python", "-m", "vllm.entrypoints.cli.main", "serve", "m"], "vllm", "vllm serve"),
        (["torchrun", "--nproc-per-node", "8", "-m", "sglang.launch_server", "--tp", "8"], "sglang", "sglang.launch_server"),
        (["numactl", "--cpunodebind=0", "env", "A=1", "python", "-msglang.launch_server"], "sglang", "sglang.launch_server"),
        (["python", "train.py", "--lr", "1e-4"], None, None),
        (["python", "-m", "vllm"], None, None),  # `vllm` without `serve` is not a server
        ([], None, None),
    ],
)
def test_entry_points_are_found_behind_wrappers(argv: list[str], kind: str | None, entry: str | None) -> None:
    parsed = parse_launch_args(argv)
    assert (parsed["kind"], parsed["entry"]) == (kind, entry)


def args(*argv: str) -> dict[str, Any]:
    return parse_launch_args(["python", "-m", "sglang.launch_server", *argv])["args"]


def test_space_and_equals_forms_are_equal() -> None:
    assert args("--mem-fraction-static", "0.55") == args("--mem-fraction-static=0.55") == {"mem_fraction_static": "0.55"}


def test_underscore_spelling_and_sglang_aliases_normalise_to_server_args_names() -> None:
    assert args("--mem_fraction_static", "0.55") == {"mem_fraction_static": "0.55"}
    assert args("--tensor-parallel-size", "8") == args("--tp-size", "8") == {"tp_size": "8"}
    assert args("--ep", "8", "--model", "/m", "--nccl-init-addr", "h:1") == {
        "ep_size": "8", "model_path": "/m", "dist_init_addr": "h:1"}


def test_switches_repeats_lists_and_negative_numbers() -> None:
    parsed = args("--trust-remote-code", "--enable-metrics", "--disable-radix-cache", "true",
                  "--chunked-prefill-size", "-1", "--x", "-0.5", "--cuda-graph-bs", "1", "2", "4",
                  "--lora-paths", "a", "--lora-paths=b", "--no-foo", "--empty=")
    assert parsed == {"trust_remote_code": True, "enable_metrics": True, "disable_radix_cache": "true",
                      "chunked_prefill_size": "-1", "x": "-0.5", "cuda_graph_bs": ["1", "2", "4"],
                      "lora_paths": ["a", "b"], "no_foo": True, "empty": ""}


def test_switch_is_not_given_the_next_flag() -> None:
    assert args("--enable-torch-compile", "--port", "30000") == {"enable_torch_compile": True, "port": "30000"}
    assert args("--port") == {"port": True}  # truncated command line: nothing to take


def test_vllm_serve_positional_model_and_short_aliases() -> None:
    parsed = parse_launch_args(["vllm", "serve", "meta-llama/Llama-3.1-8B", "--tensor-parallel-size", "8",
                                "--gpu-memory-utilization=0.9"])
    assert parsed == {"kind": "vllm", "entry": "vllm serve", "model": "meta-llama/Llama-3.1-8B",
                      "args": {"tensor_parallel_size": "8", "gpu_memory_utilization": "0.9"}}
    short = parse_launch_args(["vllm", "serve", "m", "-tp", "8", "-pp", "2", "-q", "fp8"])["args"]
    assert short == {"tensor_parallel_size": "8", "pipeline_parallel_size": "2", "quantization": "fp8"}


def test_vllm_serve_model_after_flags_and_multi_value_flags() -> None:
    parsed = parse_launch_args(["vllm", "serve", "--port", "8000", "m/x", "--served-model-name", "a", "b"])
    assert parsed["model"] == "m/x" and parsed["args"] == {"port": "8000", "served_model_name": ["a", "b"]}


def test_model_comes_from_the_model_flag_when_not_positional() -> None:
    assert parse_launch_args(["python", "-m", "sglang.launch_server", "--model-path", "/m"])["model"] == "/m"
    api = parse_launch_args(["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "/v", "--port", "1"])
    assert api["model"] == "/v" and api["args"] == {"model": "/v", "port": "1"}


def test_wrapper_arguments_are_not_server_arguments() -> None:
    parsed = parse_launch_args(["torchrun", "--nproc-per-node", "8", "-m", "sglang.launch_server", "--port", "1"])
    assert parsed["args"] == {"port": "1"}


def test_double_dash_ends_flags_and_unknown_commands_still_parse() -> None:
    assert args("--port", "1", "--", "--not-a-flag") == {"port": "1"}
    unknown = parse_launch_args(["python", "train.py", "--lr", "1e-4", "--bf16"])
    assert unknown == {"kind": None, "entry": None, "model": None, "args": {"lr": "1e-4", "bf16": True}}


def test_find_entry_index() -> None:
    assert find_entry(["python", "-m", "sglang.launch_server", "--x"]) == ("sglang", "sglang.launch_server", 3)
    assert find_entry(["vllm", "serve", "m"]) == ("vllm", "vllm serve", 2)
