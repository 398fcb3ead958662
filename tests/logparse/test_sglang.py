"""The SGLang log parser over every real sample in tests/fixtures/sglang-logs and over
composed logs in the forms the fixtures describe (2026 dict form, INFO prefixes, the seed
incident's good and bad runs)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from driftwatch.logparse import (
    detect_and_parse,
    detect_kind,
    parse_log_parts,
    parse_sglang_log,
)
from tests.seed import seed_log

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sglang-logs"


def _args_samples() -> list[tuple[str, str]]:
    """Each ServerArgs sample: its line plus the lines that continue it (up to a comment)."""
    samples: list[tuple[str, str]] = []
    header, block = "", None
    for line in (FIXTURES / "server_args_lines.txt").read_text().splitlines():
        numbered = re.match(r"## (\d\))", line)
        if numbered:
            header = numbered.group(1)
        if "server_args=ServerArgs(" in line and not line.startswith("#"):
            block = [line]
            samples.append((header, ""))
        elif block is not None and line and not line.startswith("#"):
            block.append(line)
        else:
            block = None
        if block is not None:
            samples[-1] = (samples[-1][0], "\n".join(block))
    return samples


def _startup_blocks() -> dict[str, str]:
    """Each lettered block of startup_log_samples.txt, comment lines removed."""
    blocks: dict[str, list[str]] = {}
    current = None
    for line in (FIXTURES / "startup_log_samples.txt").read_text().splitlines():
        header = re.match(r"#{10} ([A-Z])\.", line)
        if header:
            current = header.group(1)
            blocks[current] = []
        elif current and line.strip() and not line.startswith("#"):
            blocks[current].append(line)
    return {letter: "\n".join(lines) for letter, lines in blocks.items()}


ARGS_SAMPLES = _args_samples()
STARTUP = _startup_blocks()
# (mem_fraction_static, tp_size) as each fixture line shows them; None: cut off before it.
EXPECTED_ARGS = {"1)": (0.81, None), "2)": (0.88, 1), "3)": (0.8639842241317652, 1), "4)": (0.8, 2), "5)": (0.88, None)}


def test_fixture_has_every_era() -> None:
    assert [header for header, _ in ARGS_SAMPLES] == list(EXPECTED_ARGS)
    assert sorted(STARTUP) == list("ABCDEFGHIJKL")


@pytest.mark.parametrize(("header", "text"), ARGS_SAMPLES, ids=[h for h, _ in ARGS_SAMPLES])
def test_every_server_args_line(header: str, text: str) -> None:
    facts = parse_sglang_log(text)
    args = facts["server_args"]
    # As in the text itself, and as read by a person.
    in_text = re.search(r"mem_fraction_static=([\d.]+)", text)
    assert in_text and args["mem_fraction_static"] == float(in_text.group(1)) == EXPECTED_ARGS[header][0]
    tp = re.search(r"\btp_size=(\d+)", text)
    assert args.get("tp_size") == (int(tp.group(1)) if tp else None) == EXPECTED_ARGS[header][1]
    assert facts["key_args"]["mem_fraction_static"] == args["mem_fraction_static"]
    assert facts["kind"] == "sglang" == detect_kind(text)
    assert facts["server_args_form"] == "ServerArgs" and facts["server_args_truncated"] is True
    assert args["model_path"] == re.search(r"model_path='([^']*)'", text).group(1)  # type: ignore[union-attr]
    # The cut-off value is dropped, never half-read; everything is plain JSON.
    assert not any("TRUNCATED" in str(value) for value in args.values())
    json.dumps(facts, allow_nan=False)


def test_line_break_inside_a_value_is_joined() -> None:
    text = dict(ARGS_SAMPLES)["2)"]
    assert "log_requests=Fa\nlse" in text
    args = parse_sglang_log(text)["server_args"]
    assert args["log_requests"] is False and args["log_requests_level"] == 0
    assert args["random_seed"] == 827599081 and args["chunked_prefill_size"] == 8192


def test_values_of_every_type() -> None:
    args = parse_sglang_log(dict(ARGS_SAMPLES)["4)"])["server_args"]
    assert args["host"] == "[127.0.0.1](http://127.0.0.1/)" and args["device"] == "cpu"
    assert args["max_queued_requests"] == 9223372036854775807 and args["max_total_tokens"] == 63356
    assert args["model_loader_extra_config"] == "{}" and args["warmups"] is None and args["trust_remote_code"] is True
    old = parse_sglang_log(dict(ARGS_SAMPLES)["5)"])["server_args"]  # 2024: no prefix at all
    assert old["additional_ports"] == [8001, 8002, 8003, 8004] and old["context_length"] == 4096


def test_key_args_subset() -> None:
    facts = parse_sglang_log(dict(ARGS_SAMPLES)["1)"])
    assert facts["key_args"] == {
        "model_path": "/data/textgen_cache/models/deepseek-v3", "dtype": "auto", "kv_cache_dtype": "auto",
        "quantization": None, "context_length": None, "mem_fraction_static": 0.81,
        "max_running_requests": None, "max_total_tokens": None,
    }  # fmt: skip


# Per block: rank -> the memory facts its lines print; "ready" and error kinds beside.
EXPECTED_MEMORY: dict[str, dict[str, dict[str, float]]] = {
    "A": {"TP0": {"avail_mem_after_load_gb": 9.69, "avail_mem_after_pool_gb": 2.44, "graph_capture_s": 2.19,
                  "max_total_num_tokens": 56524, "max_prefill_tokens": 16384, "max_running_requests": 2049,
                  "context_len": 32768}},
    "B": {"TP0": {"avail_mem_after_load_gb": 36.51, "avail_mem_after_pool_gb": 22.03},
          "TP1": {"avail_mem_after_load_gb": 36.48, "avail_mem_after_pool_gb": 22.0}},
    "C": {"TP0": {"mem_fraction_static_auto_reduced": 0.76, "avail_mem_before_load_gb": 22.46}},
    "D": {"TP7": {"dist_init_mem_gb": 1.77},
          "TP0": {"dist_init_mem_gb": 1.96, "avail_mem_before_load_gb": 137.34, "avail_mem_before_graph_gb": 11.82},
          "TP5": {"kv_cache_tokens": 2795207, "k_size_gb": 53.31, "v_size_gb": 53.31, "kv_cache_gb": 106.62,
                  "avail_mem_after_pool_gb": 11.87}},
    "E": {"main": {"graph_mem_gb": 1.44, "avail_mem_after_graph_gb": 37.06, "graph_capture_s": 5.92,
                   "max_total_num_tokens": 2261377, "chunked_prefill_size": 16384, "max_prefill_tokens": 16384,
                   "max_running_requests": 4096, "context_len": 128000, "available_gpu_mem_gb": 37.06}},
    "F": {"TP1": {"graph_mem_gb": 1.04, "avail_mem_after_graph_gb": 11.22, "graph_capture_s": 11.35},
          "TP0": {"graph_mem_gb": 1.0, "avail_mem_after_graph_gb": 11.17, "graph_capture_s": 11.39},
          "main": {"piecewise_graph_mem_gb": 1.99, "avail_mem_after_piecewise_graph_gb": 24.83,
                   "piecewise_graph_capture_s": 58.13, "max_total_num_tokens": 889384, "chunked_prefill_size": 8192,
                   "max_prefill_tokens": 16384, "max_running_requests": 4, "context_len": 128000,
                   "available_gpu_mem_gb": 24.83}},
    "G": {"TP0": {"load_weight_s": 653.47, "avail_mem_after_load_gb": 19.08, "weight_mem_gb": 3.76,
                  "mamba_cache_gb": 7.42, "conv_state_gb": 0.13, "ssm_state_gb": 7.29, "max_mamba_cache_size": 82, "kv_cache_tokens": 580364, "k_size_gb": 4.15, "v_size_gb": 4.15,
                  "kv_cache_gb": 8.3, "avail_mem_after_pool_gb": 4.02, "max_total_num_tokens": 580364,
                  "chunked_prefill_size": 2048, "max_prefill_tokens": 16384, "max_running_requests": 1,
                  "context_len": 8192, "available_gpu_mem_gb": 3.63}},
    "H": {"TP10": {"kv_cache_tokens": 387968, "k_size_gb": 5.92, "v_size_gb": 5.92, "kv_cache_gb": 11.84,
                   "avail_mem_after_pool_gb": 11.23}},
    "I": {"main": {"avail_mem_after_load_gb": 12.25, "weight_mem_gb": 125.65}},
    "J": {"TP0": {"kv_cache_tokens": 383872, "kv_cache_gb": 19.36}},
}  # fmt: skip
READY = {"A": True, "E": True, "J": True}
ERROR_KINDS = {"I": [("kv-budget", "no_kv_memory")] * 3}


@pytest.mark.parametrize("letter", sorted(EXPECTED_MEMORY))
def test_every_startup_block(letter: str) -> None:
    facts = detect_and_parse(STARTUP[letter])
    assert facts["kind"] == "sglang"
    assert facts["memory"] == EXPECTED_MEMORY[letter]
    assert facts["ready"] is READY.get(letter, False)
    assert [(error["kind"], error["detail"]) for error in facts["errors"]] == ERROR_KINDS.get(letter, [])
    json.dumps(facts, allow_nan=False)


def test_kv_cache_dtype_line() -> None:
    assert detect_and_parse(STARTUP["G"])["kv_cache_dtype"] == "torch.bfloat16"  # "Using KV cache dtype: …"


def test_no_kv_memory_variants_stay_distinct() -> None:
    errors = parse_sglang_log(STARTUP["I"])["errors"]
    assert [e["message"] for e in errors] == [
        "ValueError: Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.88.",
        "ValueError: Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.9.",
        "ValueError: Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.1",
    ]
    assert all(e["count"] == 1 for e in errors)


# Every KV-budget, imbalance, OOM and NCCL message the fixtures list (section L gives the
# source-code forms by era), as the log line each one produces.
ERROR_LINES = [
    ("kv-budget", "not_enough_memory", "RuntimeError: Not enought memory. Please try to increase --mem-fraction-static."),
    ("kv-budget", "not_enough_memory", "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."),
    ("kv-budget", "not_enough_memory", ("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
                                        "Current value: self.server_args.mem_fraction_static=0.85")),
    ("kv-budget", "not_enough_memory", ("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
                                        "Current value: mem_fraction_static=0.85")),
    ("kv-budget", "no_kv_memory", ("ValueError: Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.88. "
                                   "Raise --mem-fraction-static above 0.912 (minimum viable = 1 - available/pre = 0.9120). "
                                   "If using speculative decoding, draft weights are now counted.")),
    ("kv-budget", "tp_memory_imbalance", ("ValueError: The memory capacity is unbalanced. Some GPUs may be occupied by other "
                                          "processes. min_per_gpu_memory=61.2, local_gpu_memory=78.5, local_gpu_memory * 0.9=70.65")),
    ("oom", "cuda_oom", ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
                         "capacity of 79.10 GiB of which 1.06 GiB is free.")),
    ("oom", "cuda_oom", "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB"),
    ("nccl", "nccl_error", ("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
                            "ProcessGroupNCCL.cpp:1970, unhandled cuda error (run with NCCL_DEBUG=INFO for details), "
                            "NCCL version 2.21.5")),
    ("nccl", "nccl_error", "ncclUnhandledCudaError: Call to CUDA function failed."),
    ("nccl", "nccl_error", "RuntimeError: ncclInternalError: Internal check failed."),
    ("nccl", "nccl_error", "gpu01:3171:3171 [3] NCCL INFO ncclSystemError: System call (e.g. socket, malloc) failed"),
    ("nccl", "nccl_timeout", ("[rank3]:[E1129 10:00:00.000 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective "
                              "operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE) ran for 600000 milliseconds")),
]  # fmt: skip


@pytest.mark.parametrize("prefix", ["", "[2026-02-25 14:02:11 TP3] ", "[2026-02-25 14:02:11 DP0 TP3 EP3] "])
@pytest.mark.parametrize(("kind", "detail", "line"), ERROR_LINES, ids=[f"{d}-{i}" for i, (_, d, _) in enumerate(ERROR_LINES)])
def test_every_error_variant(kind: str, detail: str, line: str, prefix: str) -> None:
    errors = parse_sglang_log(f"[2026-02-25 14:02:10 TP3] Scheduler hit an exception: Traceback\n{prefix}{line}\n")["errors"]
    # The exception says why; the scheduler's line (listed after: not a cause) that start-up failed.
    rank = "DP0 TP3 EP3" if "DP0" in prefix else "TP3"  # a bare traceback line is the raising rank's
    assert [(e["kind"], e["detail"], e["count"], e["ranks"]) for e in errors] == [
        (kind, detail, 1, [rank]), ("engine-start", "startup_exception", 1, ["TP3"])]
    message = errors[0]["message"]
    assert len(message) <= 300 and "\n" not in message and "14:02:11" not in message
    assert message == line[:300] or message in line


def test_nccl_versions_are_collected() -> None:
    text = (
        "gpu01:3171:3171 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n"
        "[2025-03-07 09:25:11 TP0] sglang is using nccl==2.21.5\n"
        f"{ERROR_LINES[8][1]}\n"
    )
    assert parse_sglang_log(text)["nccl_versions"] == ["2.21.5", "2.21.5+cuda12.4"]


# The 2026 forms: arguments as a resolved dict, or ServerArgs with values that are not
# literals, and "INFO file.py:N:" after the bracket prefix.
LOG_2026 = """\
[2026-03-21 03:31:56] INFO engine.py:177: server_args={'model_path': 'deepseek-ai/DeepSeek-R1-Distill-Qwen-7B', \
'tp_size': 2, 'pp_size': 1, 'dp_size': 1, 'ep_size': 1, 'mem_fraction_static': 0.871, 'cuda_graph_max_bs': 256, \
'chunked_prefill_size': 8192, 'max_total_tokens': None, 'context_length': 32768, 'attention_backend': 'fa3', \
'kv_cache_dtype': 'fp8_e4m3', 'speculative_algorithm': 'EAGLE3', 'speculative_num_steps': 3, \
'speculative_eagle_topk': 1, 'speculative_num_draft_tokens': 4, 'enable_dp_attention': False, \
'disable_cuda_graph': False, 'page_size': 64, 'json_model_override_args': '{"a": 1}', 'host': '127.0.0.1'}
[2026-03-21 03:31:58 TP0] INFO model_runner.py:412: Load weight begin. avail mem=78.43 GB
[2026-03-21 03:31:58 TP1] INFO model_runner.py:412: Load weight begin. avail mem=78.41 GB
[2026-03-21 03:32:10 TP1] INFO model_runner.py:480: Load weight end. elapsed=11.80 s, type=Qwen2ForCausalLM, quant=None, avail mem=71.20 GB, mem usage=7.21 GB.
[2026-03-21 03:32:10 TP0] INFO model_runner.py:480: Load weight end. elapsed=11.92 s, type=Qwen2ForCausalLM, quant=None, avail mem=71.22 GB, mem usage=7.21 GB.
[2026-03-21 03:32:11 TP0] INFO memory_pool.py:731: KV Cache is allocated. dtype: torch.float8_e4m3fn, #tokens: 1871232, K size: 29.98 GB, V size: 29.98 GB
[2026-03-21 03:32:11 TP0] INFO model_runner.py:520: Load weight begin. avail mem=11.20 GB
[2026-03-21 03:32:12 TP0] INFO model_runner.py:530: Load weight end. type=LlamaForCausalLMEagle3, quant=None, avail mem=10.40 GB, mem usage=0.80 GB.
[2026-03-21 03:32:40] INFO http_server.py:1300: The server is fired up and ready to roll!
"""


def test_2026_dict_form_with_file_prefix_and_draft_model() -> None:
    facts = detect_and_parse(LOG_2026)
    assert facts["kind"] == "sglang" and facts["server_args_form"] == "dict" and not facts["server_args_truncated"]
    key = facts["key_args"]
    assert key["mem_fraction_static"] == 0.871 and key["tp_size"] == 2 and key["attention_backend"] == "fa3"
    assert key["speculative_algorithm"] == "EAGLE3" and key["speculative_num_draft_tokens"] == 4
    assert key["page_size"] == 64 and key["enable_dp_attention"] is False and "host" not in key
    assert facts["server_args"]["json_model_override_args"] == '{"a": 1}'
    tp0 = facts["memory"]["TP0"]
    assert tp0["avail_mem_before_load_gb"] == 78.43 and tp0["avail_mem_after_load_gb"] == 71.22
    assert tp0["weight_mem_gb"] == 7.21 and tp0["load_weight_s"] == 11.92
    assert tp0["kv_cache_tokens"] == 1871232 and tp0["kv_cache_gb"] == 59.96
    # The EAGLE draft model loads after the target: its numbers must not replace them.
    assert tp0["draft_avail_mem_after_load_gb"] == 10.4 and tp0["draft_weight_mem_gb"] == 0.8
    assert facts["memory"]["TP1"]["avail_mem_after_load_gb"] == 71.2
    assert facts["ready"] is True and facts["errors"] == []


def test_2026_server_args_with_non_literal_values() -> None:
    line = (
        "[2026-03-21 03:31:56] INFO engine.py:177: server_args=ServerArgs(model_path='Qwen/Qwen3-8B', "
        "lora_paths=[LoRARef(lora_id='a1', lora_name='x, y', lora_path='/p')], mem_fraction_static=0.836, "
        "hf_config=<transformers.PretrainedConfig object at 0x7f3a>, tp_size=1, json_model_override_args='{}', "
        "disable_cuda_graph=True)"
    )
    facts = parse_sglang_log(line)
    args = facts["server_args"]
    assert args["lora_paths"] == "[LoRARef(lora_id='a1', lora_name='x, y', lora_path='/p')]"
    assert args["hf_config"] == "<transformers.PretrainedConfig object at 0x7f3a>"
    assert args["mem_fraction_static"] == 0.836 and args["tp_size"] == 1 and args["disable_cuda_graph"] is True
    assert facts["server_args_truncated"] is False


def test_dp_ep_rank_tags_and_wrapped_prefix() -> None:
    text = (
        "[2025-11-04 05:27:13 DP0 TP0 EP0] Load weight end. type=DeepseekV3ForCausalLM, dtype=torch.bfloat16, "
        "avail mem=75.11 GB, mem usage=107.07 GB.\n"
        "[2025-11-04 05:27:13 DP1 TP1 EP1] KV Cache is allocated. #tokens: 524288, KV size: 17.16 GB\n"
        "2025-03-07 23:50:27,727 - __main__ - INFO - [2025-03-07 23:50:27 PP1 TP0] Load weight begin. avail mem=22.46 GB\n"
    )
    memory = parse_sglang_log(text)["memory"]
    assert memory == {
        "DP0 TP0 EP0": {"avail_mem_after_load_gb": 75.11, "weight_mem_gb": 107.07},
        "DP1 TP1 EP1": {"kv_cache_tokens": 524288, "kv_cache_gb": 17.16},
        "PP1 TP0": {"avail_mem_before_load_gb": 22.46},
    }


# The seed incident: same host, same model, TP8 on 94 GiB GPUs. The good run let SGLang
# pick mem_fraction_static (0.88); the bad one was launched with --mem-fraction-static 0.55.
def test_seed_incident_good_run() -> None:
    facts = detect_and_parse(seed_log(0.88, fails=False))
    assert facts["kind"] == "sglang" and facts["ready"] is True and facts["errors"] == []
    assert facts["key_args"]["mem_fraction_static"] == 0.88 and facts["key_args"]["tp_size"] == 8
    assert sorted(facts["memory"]) == [f"TP{rank}" for rank in range(8)]
    assert all(m["avail_mem_after_load_gb"] == 21.70 and m["kv_cache_gb"] == 10.4 for m in facts["memory"].values())
    assert facts["memory"]["TP0"]["max_total_num_tokens"] == 161792


def test_seed_incident_bad_run_on_every_rank() -> None:
    facts = detect_and_parse(seed_log(0.55, fails=True))
    assert facts["key_args"]["mem_fraction_static"] == 0.55 and facts["ready"] is False
    every_rank = [f"TP{rank}" for rank in range(8)]
    # What the error names: the module its traceback went through, that file, the exception.
    assert facts["errors"][0]["mentions"] == {
        "modules": ["sglang.srt.managers.scheduler"], "errors": ["RuntimeError"],
        "paths": ["/usr/local/lib/python3.12/dist-packages/sglang/srt/managers/scheduler.py"]}
    assert [{k: v for k, v in e.items() if k != "mentions"} for e in facts["errors"]] == [  # the likely cause first
        {"kind": "kv-budget", "detail": "not_enough_memory", "count": 8, "ranks": every_rank,
         "message": "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."},
        {"kind": "engine-start", "detail": "startup_exception", "count": 8, "ranks": every_rank,
         "message": "Scheduler hit an exception: Traceback (most recent call last):"},
        {"kind": "engine-start", "detail": "child_failed", "count": 1, "ranks": [],
         "message": "Received sigquit from a child process. It usually means the child failed."},
    ]  # fmt: skip
    assert facts["memory"]["TP3"] == {"avail_mem_before_load_gb": 93.43, "avail_mem_after_load_gb": 21.70,
                                      "weight_mem_gb": 71.73}  # fmt: skip


def test_restart_in_the_same_file_reports_the_latest_run() -> None:
    facts = parse_sglang_log(seed_log(0.55, fails=True) + seed_log(0.88, fails=False))
    assert facts["runs"] == 2 and facts["errors"] == [] and facts["ready"] is True
    assert facts["key_args"]["mem_fraction_static"] == 0.88
    back = parse_sglang_log(seed_log(0.88, fails=False) + seed_log(0.55, fails=True))
    assert back["runs"] == 2 and back["ready"] is False and back["errors"][0]["count"] == 8
    assert "kv_cache_gb" not in back["memory"]["TP0"]
    # The same line printed twice before anything happened is one start-up, not two.
    line = seed_log(0.88, fails=False).splitlines()[0]
    assert parse_sglang_log(f"{line}\n{line}\n")["runs"] == 1


def test_head_and_tail_read_apart_are_merged() -> None:
    lines = seed_log(0.55, fails=True).splitlines()
    head, tail = "\n".join(lines[:12]), "\n".join(lines[12:])
    facts = parse_log_parts(head, tail)
    assert facts["key_args"]["mem_fraction_static"] == 0.55 and facts["errors"][0]["count"] == 8
    assert facts["memory"]["TP7"]["avail_mem_after_load_gb"] == 21.70 and facts["runs"] == 1
    # A tail that holds a newer start-up describes that run alone.
    newer = parse_log_parts(head, seed_log(0.88, fails=False))
    assert newer["key_args"]["mem_fraction_static"] == 0.88 and newer["errors"] == [] and newer["runs"] == 2


@pytest.mark.parametrize("text", ["", "\x00" * 4096, bytes(range(256)).decode("latin-1") * 64, "hello\nworld\n"])
def test_nothing_recognisable(text: str) -> None:
    assert detect_kind(text) is None
    assert detect_and_parse(text) == {"kind": None, "errors": [], "nccl_versions": []}
    assert parse_sglang_log(text)["server_args"] == {} and parse_sglang_log(text)["memory"] == {}


def test_unknown_log_still_reports_cuda_oom() -> None:
    facts = detect_and_parse("step 10 loss 1.2\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1 GiB\n")
    assert facts["kind"] is None and (facts["errors"][0]["kind"], facts["errors"][0]["detail"]) == ("oom", "cuda_oom")


def test_lines_without_numbers_leave_no_empty_rank() -> None:
    text = "[2025-10-16 09:06:22 TP3] Capture cuda graph bs [1, 2, 4, 8]\n[2025-10-16 09:06:22 TP3] Load weight end. type=X\n"
    assert parse_sglang_log(text)["memory"] == {}
