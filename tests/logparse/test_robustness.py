"""Whatever a log holds, the parsers return plain JSON and never raise: real lines cut,
spliced and stuffed with absurd numbers must not cost the snapshot its logs probe."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from driftwatch.logparse import (
    detect_and_parse,
    parse_log_parts,
    parse_sglang_log,
    parse_vllm_log,
)
from driftwatch.redact import redact_facts
from tests.logparse.test_sglang import LOG_2026, seed_log
from tests.logparse.test_vllm import V0_NAMESPACE, V1_GOOD, V1_NO_MEMORY

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sglang-logs"
REAL_LINES = [
    line
    for text in [
        *(path.read_text() for path in sorted(FIXTURES.glob("*.txt"))),
        LOG_2026, seed_log(0.55, fails=True), V1_GOOD, V1_NO_MEMORY, V0_NAMESPACE,
    ]
    for line in text.splitlines()
    if line.strip()
]  # fmt: skip
ODD = ["9" * 5000, "1e999", ".", "..", "-", "", "\x00", "\ufffd", "(", "{", "'", "\\", ",", "=", "\n"]


@st.composite
def mutated_lines(draw: st.DrawFn) -> str:
    line = draw(st.sampled_from(REAL_LINES))
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, len(line)))
        action = draw(st.sampled_from(["cut", "insert", "digits"]))
        if action == "cut":
            line = line[:at]
        elif action == "insert":
            line = line[:at] + draw(st.sampled_from(ODD) | st.text(max_size=8)) + line[at:]
        else:
            line = "".join(draw(st.sampled_from(ODD)) if ch.isdigit() else ch for ch in line)
    return line


@settings(max_examples=150, deadline=None)
@given(st.lists(mutated_lines(), min_size=1, max_size=12))
def test_parsers_never_raise_and_stay_json(lines: list[str]) -> None:
    text = "\n".join(lines)
    for facts in (
        detect_and_parse(text),
        parse_sglang_log(text),
        parse_vllm_log(text),
        parse_log_parts(text[: len(text) // 2], text[len(text) // 2 :]),
    ):
        json.dumps(facts, allow_nan=False)


# ---- what real pastes add to a log (issue 14's list), each on real lines ----------------------

SGL_LOAD = "[2025-03-07 09:25:11 TP0] Load weight end. type=DeepseekV3ForCausalLM, dtype=torch.bfloat16, avail mem=36.51 GB"
VLLM_KV = "(Worker_TP0 pid=5700) INFO 11-03 05:52:30 [gpu_worker.py:298] Available KV cache memory: 58.61 GiB"


def test_crlf_line_endings() -> None:
    facts = detect_and_parse(f"{SGL_LOAD}\r\n{SGL_LOAD.replace('TP0', 'TP1')}\r\n")
    assert facts["memory"] == {"TP0": {"avail_mem_after_load_gb": 36.51}, "TP1": {"avail_mem_after_load_gb": 36.51}}


@pytest.mark.parametrize("colour", ["\x1b[1;36m{}\x1b[0;0m", "^[[1;36m{}^[[0;0m", "#033[1;36m{}#033[0;0m", "[1;36m{}[0;0m"])
def test_ansi_colour_codes_raw_caret_octal_and_without_escape(colour: str) -> None:
    # vLLM colours the process tag: "\x1b[1;36m(VllmWorkerProcess pid=240)\x1b[0;0m INFO …"
    line = colour.format("(VllmWorkerProcess pid=240)") + " INFO 02-14 08:23:15 worker.py:266] the current vLLM " \
        "instance can use total_gpu_memory (39.39GiB) x gpu_memory_utilization (0.90) = 35.45GiB^M"
    facts = parse_vllm_log(line)
    assert facts["memory"] == {"pid=240": {"total_gpu_memory_gib": 39.39, "usable_memory_gib": 35.45}}
    assert facts["gpu_memory_utilization"] == 0.9


def test_docker_and_compose_double_timestamps() -> None:
    text = (f"sglang-1  | 2025-03-07T09:25:11.123456789Z {SGL_LOAD}\n"
            f"2025-10-14T23:59:25.360249332Z {VLLM_KV.replace('Worker_TP0', 'Worker_TP1')}\n")  # fmt: skip
    assert parse_sglang_log(text)["memory"]["TP0"] == {"avail_mem_after_load_gb": 36.51}
    assert parse_vllm_log(text)["memory"]["TP1"] == {"available_kv_cache_gib": 58.61}


@pytest.mark.parametrize("indent", ["    ", "\t", "> ", ">  ", "> > ", "▎ ", "| "])
def test_markdown_indentation_and_quotes(indent: str) -> None:
    facts = detect_and_parse(f"{indent}{SGL_LOAD}\n{indent}[2025-03-07 09:25:12 TP0] Memory pool end. avail mem=22.03 GB\n")
    assert facts["kind"] == "sglang"
    assert facts["memory"] == {"TP0": {"avail_mem_after_load_gb": 36.51, "avail_mem_after_pool_gb": 22.03}}


def test_glued_worker_tags_give_each_record_its_process() -> None:
    # Two workers wrote at once: 536's tag, then 532's whole record, then 536's record untagged.
    text = (
        "(VllmWorkerProcess pid=536) (VllmWorkerProcess pid=532) INFO 07-23 20:49:31 worker.py:241] Memory profiling takes 129.95 seconds\n"
        "INFO 07-23 20:49:31 worker.py:241] model weights take 21.67GiB; non_torch_memory takes 0.36GiB; PyTorch activation "
        "peak memory takes 15.73GiB; the rest of the memory reserved for KV Cache is 3.09GiB.\n"
        "INFO 07-23 20:49:32 worker.py:241] Memory profiling takes 130.01 seconds\n"
    )  # fmt: skip
    memory = parse_vllm_log(text)["memory"]
    assert memory["pid=532"] == {"profile_s": 129.95}
    assert memory["pid=536"]["kv_cache_reserved_gib"] == 3.09 and memory["pid=536"]["activation_peak_gib"] == 15.73
    assert memory["main"] == {"profile_s": 130.01}  # the queue is spent: the next untagged line is the driver's
    # A wrapper's tag of another kind in front (Ray's actor, then the worker) is not a glued record.
    nested = "(vLLMHttpServer pid=3847687) (Worker_TP1 pid=3849557) " + VLLM_KV.split(") ", 1)[1] + "\n" + VLLM_KV.split(") ", 1)[1]
    assert parse_vllm_log(nested)["memory"] == {"TP1": {"available_kv_cache_gib": 58.61}, "main": {"available_kv_cache_gib": 58.61}}


def test_several_records_on_one_line() -> None:
    glued = f"{SGL_LOAD} {SGL_LOAD.replace('TP0', 'TP1').replace('36.51', '36.48')}"
    assert parse_sglang_log(glued)["memory"] == {"TP0": {"avail_mem_after_load_gb": 36.51},
                                                 "TP1": {"avail_mem_after_load_gb": 36.48}}  # fmt: skip
    vllm = VLLM_KV + "    " + VLLM_KV.replace("TP0", "TP1").replace("58.61", "58.59")
    assert parse_vllm_log(vllm)["memory"] == {"TP0": {"available_kv_cache_gib": 58.61},
                                              "TP1": {"available_kv_cache_gib": 58.59}}  # fmt: skip


def test_tqdm_bar_with_a_record_appended() -> None:
    sglang = ("Capturing batches (bs=1 avail_mem=37.08 GB): 100%|██████████| 52/52 [00:05<00:00,  9.85it/s]"
              "[2025-11-30 11:18:01] Capture cuda graph end. Time elapsed: 5.92 s. mem usage=1.44 GB. avail mem=37.06 GB.")
    assert parse_sglang_log(sglang)["memory"] == {
        "main": {"graph_mem_gb": 1.44, "avail_mem_after_graph_gb": 37.06, "graph_capture_s": 5.92}}
    vllm = ("Loading safetensors checkpoint shards: 100% Completed | 4/4 [00:03<00:00,  1.10it/s]"
            "(VllmWorker rank=0 pid=308491) INFO 03-27 16:21:51 [gpu_model_runner.py:1176] Model loading took 7.3858 GB "
            "and 4.031594 seconds\rLoading safetensors checkpoint shards: 100% Completed | 4/4")  # fmt: skip
    assert parse_vllm_log(vllm)["memory"] == {"rank0": {"model_weights_gb": 7.3858, "model_load_s": 4.031594}}


def test_log_that_starts_mid_line() -> None:
    text = ("25 TP3] Load weight end. type=X, dtype=torch.bfloat16, avail mem=9.1 GB\n"  # no rank to trust
            "2025-09-13 09:09:15 TP0] Load weight end. type=X, dtype=torch.bfloat16, avail mem=9.69 GB\n")  # fmt: skip
    assert parse_sglang_log(text)["memory"] == {"main": {"avail_mem_after_load_gb": 9.1},
                                                "TP0": {"avail_mem_after_load_gb": 9.69}}  # fmt: skip


def test_17_kb_server_args_line_with_a_redacted_key() -> None:
    fields = [f"'field_{i:03d}_{name}': {value!r}" for i, (name, value) in enumerate(
        [("flag", False), ("size", 4096), ("ratio", 0.25), ("path", "/models/some/long/path/to/weights"), ("none", None),
         ("list", [1, 2, 4, 8, 16, 32, 64, 128]), ("json", '{"a": 1}')] * 75)]  # fmt: skip
    body = ", ".join(["'model_path': 'deepseek-ai/DeepSeek-V3'", "'api_key': '[REDACTED]'", "'tp_size': 8",
                      *fields, "'mem_fraction_static': 0.88"])  # fmt: skip
    line = f"[2026-05-15 08:39:30] server_args={{{body}}}"
    assert len(line) > 17_000
    facts = parse_sglang_log(line + "\n[2026-05-15 08:39:36 TP0] Load weight begin. avail mem=93.61 GB\n")
    assert facts["server_args_truncated"] is False and len(facts["server_args"]) == 7 * 75 + 4
    assert facts["key_args"]["mem_fraction_static"] == 0.88 and facts["parallel"] == {"tp": 8}
    assert facts["server_args"]["api_key"] == "[REDACTED]"
    assert redact_facts(facts)["server_args"]["api_key"] == "<redacted>"


def test_two_weight_loads_target_first_in_vllm() -> None:
    # Speculative decoding: the drafter loads after the target on each worker.
    prefix = "(VllmWorker rank=5 pid=6131) INFO 07-29 16:04:46 "
    text = (f"{prefix}[gpu_model_runner.py:1892] Model loading took 78.21 GiB and 30.1 seconds\n"
            f"{prefix}[gpu_model_runner.py:1908] Loading drafter model...\n"
            f"{prefix}[gpu_model_runner.py:1892] Model loading took 4.05 GiB and 6.2 seconds\n")  # fmt: skip
    facts = parse_vllm_log(text)
    assert facts["memory"]["rank5"] == {"model_weights_gib": 78.21, "model_load_s": 30.1,
                                        "draft_model_weights_gib": 4.05, "draft_model_load_s": 6.2}  # fmt: skip
    assert facts["headline"]["model_weights_gib"] == 78.21


def test_hybrid_mamba_cache_lines() -> None:
    facts = parse_sglang_log(
        "[2026-02-27 17:10:28 TP0] Mamba Cache is allocated. max_mamba_cache_size: 82, conv_state size: 0.13GB, "
        "ssm_state size: 7.29GB \n"
        "[2026-02-27 17:10:28 TP0] KV Cache is allocated. #tokens: 580364, K size: 4.15 GB, V size: 4.15 GB\n"
    )
    assert facts["memory"]["TP0"] == {"max_mamba_cache_size": 82, "conv_state_gb": 0.13, "ssm_state_gb": 7.29,
                                      "mamba_cache_gb": 7.42, "kv_cache_tokens": 580364, "k_size_gb": 4.15,
                                      "v_size_gb": 4.15, "kv_cache_gb": 8.3}  # fmt: skip


# ---- bounds: hostile lines cost one pass ----------------------------------------------------

HOSTILE = {
    "parens": "(" * (1 << 20), "spaces": " " * (1 << 20), "letters": "a" * (1 << 20), "brackets": "[" * (1 << 20),
    "assignments": "a=" * (1 << 19), "quotes": "'" * (1 << 20), "tags": "(pid=1) " * (1 << 17),
    "prefixes": "[2025-01-01 00:00:00 TP0] " * (1 << 15), "records": "INFO 01-01 00:00:00 x.py:1] " * (1 << 15),
    "args": "server_args=ServerArgs(" + "a=(" * (1 << 18), "config": "LLM engine (v1) with config: " + "k=v " * (1 << 18),
    "exception": "A" * (1 << 20) + "Error: out of memory", "no newline, 2 MiB": "x" * (2 << 20),
    # a cut argument line makes the parser look at the next line as its possible continuation
    "after a cut argument line": "server_args=ServerArgs(a=1, b=2\n" + "a" * (1 << 20),
    "after a cut engine line": "INFO 01-01 00:00:00 x.py:1] Initializing an LLM engine with config: a=1\n" + "a" * (1 << 20),
}  # fmt: skip


def test_hostile_lines_finish() -> None:
    # In a child process under a generous deadline: catastrophic backtracking would hang it for
    # minutes; one linear pass per line takes well under a second each.
    code = (
        "import sys\n"
        "from tests.logparse.test_robustness import HOSTILE\n"
        "from driftwatch.logparse import detect_and_parse, parse_log_parts, parse_sglang_log, parse_vllm_log\n"
        "for text in HOSTILE.values():\n"
        "    for parse in (detect_and_parse, parse_sglang_log, parse_vllm_log):\n"
        "        parse(text)\n"
        "    parse_log_parts(text, text)\n"
        "print('done')\n"
    )
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0 and done.stdout.strip() == "done", done.stderr[-2000:]


def test_every_fixture_survives_redaction_as_json() -> None:
    for path in sorted((FIXTURES.parent / "server-logs").glob("*.log")):
        json.dumps(redact_facts(detect_and_parse(path.read_text())), allow_nan=False)
