"""The GPU section's report turned into facts: figures with the samples taken while each
ran, and a reason for every figure a worker never reported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from driftwatch.probes.perf_preflight import Preflight
from driftwatch.probes.perf_report import SAMPLE_FIELDS, parse_gpu_run, parse_sample, throttle_reasons

TESTS = Path(__file__).resolve().parents[1]
CAPTURES = TESTS / "fixtures" / "nvidia-smi"
FAKE = TESTS / "fakes" / "nvidia-smi"
A, B = "GPU-aaaa", "GPU-bbbb"


def preflight() -> Preflight:
    gpus = {uuid: {"index": i, "name": "NVIDIA H100 80GB HBM3", "bus_id": f"00000000:{0x18 + i:02X}:00.0",
                   "driver_version": "590.48.01", "power_limit_w": 700.0} for i, uuid in enumerate((A, B))}
    return Preflight(gpus=gpus)


def lines(*messages: dict[str, Any]) -> str:
    return "\n".join(json.dumps(m) for m in messages) + "\n"


def figure(gpu: str, name: str, value: float, t0: float, t1: float) -> dict[str, Any]:
    return {"kind": "figure", "gpu": gpu, "name": name, "status": "ok", "value": value, "p10": value * 0.99,
            "p90": value * 1.01, "n": 10, "unit": "TFLOP/s", "method": "bf16", "remeasured": None, "t0": t0, "t1": t1}


def sample(t: float, uuid: str, sm: int, reasons: str, gen: int = 5) -> dict[str, Any]:
    return {"kind": "sample", "t": t, "row": f"{uuid}, {sm}, 2619, 650.10, 700.00, {reasons}, {gen}, 16, 60"}


START = [{"kind": "python", "python": "/root/ml-env/bin/python3"},
         {"kind": "context", "torch": "2.8.0+cu128", "cuda": "12.8", "cublas": "12.8.4.1", "nccl": "2.27.3",
          "cudnn": 91002, "cuda_available": True, "devices": []},
         {"kind": "placement", "gpu": A, "numa_node": 0, "cpus": 32}, {"kind": "placement", "gpu": B, "numa_node": 1, "cpus": 32},
         {"kind": "sample_fields", "fields": SAMPLE_FIELDS}, {"kind": "go", "word": "go", "t": 100.0}]


def test_a_complete_run() -> None:
    text = lines(*START,
                 sample(100.5, A, 1980, "0x0000000000000000"), sample(100.6, B, 1410, "0x0000000000000004"),
                 figure(A, "gemm_bf16", 798.0, 100.2, 101.0), figure(B, "gemm_bf16", 612.0, 100.2, 101.0),
                 sample(102.0, B, 1980, "0x0000000000000000", gen=5),
                 {"kind": "all_reduce", "status": "ok", "value": 478.0, "unit": "GB/s", "method": "nccl", "algbw": 273.1,
                  "ranks": 2, "t0": 103.0, "t1": 104.0, "env": {"NCCL_NVLS_ENABLE": "1"}},
                 *({"kind": "worker", "gpu": g, "rc": 0, "killed": False, "stderr": "", "reported": []} for g in (A, B)),
                 {"kind": "done"})
    run = parse_gpu_run(text, preflight(), bound_s=60, cut=False)
    assert run.section["status"] == "ok" and run.section["python"] == "/root/ml-env/bin/python3"
    assert run.section["context"] == {"driver": "590.48.01", "torch": "2.8.0+cu128", "cuda": "12.8",
                                      "cublas": "12.8.4.1", "nccl": "2.27.3", "cudnn": 91002}
    slow = run.gpus[B]["figures"]["gemm_bf16"]
    assert slow["value"] == 612.0 and "t0" not in slow and "kind" not in slow
    assert slow["during"]["throttle"] == {"SW_POWER_CAP": 1.0} and slow["during"]["sm_clock_mhz"] == 1410.0
    assert run.gpus[B]["during"]["throttle"] == {"SW_POWER_CAP": 0.5} and run.gpus[B]["numa_node"] == 1
    assert run.gpus[A]["figures"]["gemm_bf16"]["during"]["throttle"] == {}
    # Figures the worker never reported, after a clean exit: an error, never absent.
    assert run.gpus[A]["figures"]["hbm_copy"]["status"] == "error"
    assert run.all_reduce is not None and run.all_reduce["value"] == 478.0 and run.all_reduce["env"]


def test_a_run_cut_at_the_bound_names_what_was_cut() -> None:
    text = lines(*START, figure(A, "gemm_bf16", 798.0, 100.2, 101.0))
    run = parse_gpu_run(text, preflight(), bound_s=60, cut=True)
    assert run.gpus[A]["figures"]["gemm_bf16"]["value"] == 798.0  # what finished is kept
    assert run.gpus[A]["figures"]["hbm_copy"] == {"status": "timeout", "reason": "cut short at the perf bound of 60s"}
    assert run.all_reduce == {"status": "timeout", "reason": "no result within the perf bound of 60s (an NCCL hang?)"}


def test_a_worker_that_died_says_so() -> None:
    text = lines(*START, figure(A, "gemm_bf16", 798.0, 100.2, 101.0),
                 {"kind": "worker", "gpu": A, "rc": 0, "killed": False, "stderr": "", "reported": []},
                 {"kind": "worker", "gpu": B, "rc": -11, "killed": False,
                  "stderr": "RuntimeError: CUDA error: an illegal memory access was encountered", "reported": []},
                 {"kind": "done"})
    run = parse_gpu_run(text, preflight(), bound_s=60, cut=False)
    assert run.gpus[B]["figures"]["gemm_bf16"] == {"status": "error", "reason": (
        "the GPU's worker exited (status -11): RuntimeError: CUDA error: an illegal memory access was encountered")}
    assert run.all_reduce is not None and run.all_reduce["status"] == "error"
    assert "illegal memory access" in run.all_reduce["reason"]


def test_a_skipped_section_keeps_its_reason() -> None:
    text = lines({"kind": "section", "status": "skipped", "reason": "no torch in the configured interpreters"},
                 {"kind": "done"})
    run = parse_gpu_run(text, preflight(), bound_s=60, cut=False)
    assert run.section["status"] == "skipped" and run.all_reduce is None


def test_one_gpu_has_nothing_to_all_reduce() -> None:
    one = Preflight(gpus={A: preflight().gpus[A]})
    run = parse_gpu_run(lines(*START[:3], {"kind": "done"}), one, bound_s=60, cut=False)
    assert run.all_reduce == {"status": "skipped", "reason": "one GPU: nothing to all-reduce"}


@pytest.mark.parametrize(("mask", "reasons"), [
    ("0x0000000000000001", []),  # GPU_IDLE is no slowdown
    ("0x0000000000000004", ["SW_POWER_CAP"]),
    ("0x00000000000000C8", ["HW_SLOWDOWN", "HW_THERMAL_SLOWDOWN", "HW_POWER_BRAKE_SLOWDOWN"]),
    ("[N/A]", []), ("", []),
])
def test_throttle_reasons(mask: str, reasons: list[str]) -> None:
    assert throttle_reasons(mask) == reasons


@pytest.mark.parametrize("capture", ["linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.txt",
                                     "linux-x86_64__nvidia-geforce-rtx-2080-super__595.71.05.txt"])
def test_sample_rows_of_the_real_captures(capture: str) -> None:
    out = subprocess.run([sys.executable, str(FAKE), "--query-gpu=" + ",".join(SAMPLE_FIELDS),
                          "--format=csv,noheader,nounits"], capture_output=True, text=True, check=True,
                         env={**os.environ, "FAKE_NVIDIA_SMI_CAPTURE": str(CAPTURES / capture), "FAKE_NVIDIA_SMI_PHASE": "load"})
    parsed = parse_sample(out.stdout.strip(), SAMPLE_FIELDS, 1.0)
    assert parsed is not None
    uuid, found = parsed
    assert uuid == "GPU-00000000-0000-0000-0000-000000000000"
    assert found.sm_mhz and found.sm_mhz > 1000 and found.power_w and found.pcie_width == 16
