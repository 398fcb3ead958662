"""Perf probe facts as a real H200 host's run would leave them, built in code for the diff,
rules, fleet and report tests. Numbers are GEMM/HBM/link figures of the size real 8-GPU
H200 hosts report; the CPU section's figures are those this machine measured."""

from __future__ import annotations

from typing import Any

from driftwatch.facts.figures import VERSION, carry

GPUS = [f"GPU-{i:08x}-aaaa-bbbb-cccc-dddddddddddd" for i in range(8)]
FIGURES = {  # name: (value, unit, method)
    "gemm_bf16": (798.0, "TFLOP/s", "bf16 torch.matmul 8192x8192x8192, warm-up excluded"),
    "gemm_fp8": (1480.0, "TFLOP/s", "fp8 e4m3 torch._scaled_mm 8192x8192x8192, bf16 out, warm-up excluded"),
    "hbm_copy": (4100.0, "GB/s", "device copy of 1024 MiB, read + write bytes counted"),
    "h2d": (55.2, "GB/s", "pinned host to device, 256 MiB"),
    "d2h": (54.8, "GB/s", "device to pinned host, 256 MiB"),
}
CONTEXT = {"driver": "590.48.01", "torch": "2.8.0+cu128", "cuda": "12.8", "cublas": "12.8.4.1", "nccl": "2.27.3",
           "cudnn": 91002}


def figure(value: float, unit: str, method: str, *, remeasured: float | None = None, spread: float = 0.004,
           **extra: Any) -> dict[str, Any]:
    return {"status": "ok", "value": value, "p10": round(value * (1 - spread), 4), "p90": round(value * (1 + spread), 4),
            "n": 10, "unit": unit, "method": method, "remeasured": remeasured, **extra}


def during(throttle: dict[str, float] | None = None, sm: float = 1980.0, power: float = 690.0,
           pcie: tuple[int, int] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"samples": 12, "sm_clock_mhz": sm, "sm_clock_min_mhz": sm - 15, "mem_clock_mhz": 3201.0,
                           "power_w": power, "power_limit_w": 700.0, "temperature_max_c": 61.0,
                           "throttle": dict(throttle or {})}
    if pcie:
        out["pcie_gen"], out["pcie_width"] = pcie
    return out


def perf_facts(*, gpus: int = 8, scale: dict[int, float] | None = None, throttle: dict[int, dict[str, float]] | None = None,
               power_limit: dict[int, float] | None = None, remeasure: bool = True, busbw: float | None = 478.0,
               cpu: tuple[float, float] = (5.4, 5.5), context: dict[str, Any] | None = None,
               gpu_status: str = "ok", reason: str | None = None, previous: dict[str, Any] | None = None,
               name: str = "NVIDIA H200") -> dict[str, Any]:
    """``scale``: GPU index → factor on its figures (0.77: 23% slower, re-measured alike)."""
    scale, throttle, power_limit = scale or {}, throttle or {}, power_limit or {}
    facts: dict[str, Any] = {
        "version": VERSION, "bound_s": 60.0,
        "cpu": {"status": "ok", "reason": None, "backend": "numpy", "numpy": "2.4.6", "blas": "scipy-openblas 0.3.31",
                "threads": 2, "threads_from": "CPUs this process may run on", "python": "3.11.7",
                "cpu_model": "Intel(R) Xeon(R) Processor", "cpus": 2, "duration_s": 2.4,
                "figures": {"gemm": figure(cpu[0], "GFLOP/s", "numpy float32 matmul 512x512x512, 2 threads", spread=0.15),
                            "copy": figure(cpu[1], "GB/s", "numpy copyto of 64 MiB, read + write bytes counted",
                                           spread=0.15)}},
        "gpu": {"status": gpu_status, "reason": reason, "python": "/root/ml-env/bin/python3",
                "context": dict(context or CONTEXT), "duration_s": 31.2},
        "gpus": {}, "all_reduce": None,
    }
    for index, uuid in enumerate(GPUS[:gpus]):
        factor = scale.get(index, 1.0)
        figures = {}
        if gpu_status == "ok":
            for fname, (value, unit, method) in FIGURES.items():
                got = round(value * factor, 2)
                figures[fname] = figure(got, unit, method, remeasured=round(got * 1.004, 2) if remeasure else None,
                                        during=during(throttle.get(index), sm=1980.0 * min(1.0, factor + 0.02),
                                                      pcie=(5, 16) if fname in ("h2d", "d2h") else None))
        facts["gpus"][uuid] = {
            "index": index, "name": name, "bus_id": f"00000000:{0x18 + index * 0x10:02X}:00.0", "compute_cap": "9.0",
            "memory_total_mib": 143771, "power_limit_w": power_limit.get(index, 700.0), "persistence_mode": "Enabled",
            "sm_clock_max_mhz": 1980, "mem_clock_max_mhz": 3201, "pcie_gen_max": 5, "pcie_width_max": 16,
            "numa_node": 0 if index < 4 else 1, "figures": figures, "during": during(throttle.get(index)),
        }
    if gpu_status == "ok" and gpus > 1 and busbw is not None:
        facts["all_reduce"] = figure(busbw, "GB/s", f"NCCL all-reduce of 1024 MiB float32 over {gpus} GPUs, one process "
                                     "each, 5 warm-up + 20 timed; busbw = algbw x 2(n-1)/n", spread=0.01,
                                     remeasured=busbw * 1.002 if remeasure else None, algbw=round(busbw / 1.75, 2),
                                     ranks=gpus, bytes=1 << 30, nccl=CONTEXT["nccl"], env={"NCCL_NVLS_ENABLE": "1"})
    elif gpus < 2:
        facts["all_reduce"] = {"status": "skipped", "reason": "one GPU: nothing to all-reduce"}
    facts["history"] = carry(previous or {}, facts)
    return facts
