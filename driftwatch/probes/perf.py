"""The ``perf`` probe (opt-in: ``--perf``, ``[watch] perf = true``): what the host delivers.

Three sections, one after the other, within one hard wall-clock bound (``[watch]
perf_timeout``, 60 s): everything a section starts runs in the agent's session for the
command and is killed with it at its deadline (``transport/scripts/agent.py``).

- **cpu**, on every host: ``scripts/perf_cpu.py`` under the first configured interpreter,
  with its site-packages (numpy where it has one, the standard library otherwise): a GEMM
  in GFLOP/s and a memory copy in GB/s, with the thread count used.
- **preflight**: nvidia-smi, before anything initialises CUDA (``perf_preflight.py``): a
  busy GPU or MIG refuses the GPU section, with the reason.
- **gpu**: ``scripts/perf_gpu.py`` starts one worker per GPU under the interpreter that has
  torch, all GPUs at once: bf16 and fp8 GEMM, HBM copy, pinned host<->device copies, then
  one NCCL all-reduce; nvidia-smi samples clocks, power and throttle reasons meanwhile.
  What finished before the bound is kept; the rest says why not (``perf_report.py``).

Figures carry their spread, the software they ran on, and the probe's ``VERSION``; the
facts carry the host's accepted history forward (``figures.carry``), and a figure below the
previous snapshot's floor is measured again in the same run, which the diff requires
before it calls a drop a drop. Nothing here changes a clock, a power limit or a mode.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from typing import Any

from driftwatch import interrupt
from driftwatch.facts.figures import VERSION, carry, floors, split_key
from driftwatch.probes.base import Facts, ProbeContext, ProbeError, ProbeSkipped, ProbeTimeout, json_report, load_script
from driftwatch.probes.perf_preflight import Preflight, refusal, run_preflight
from driftwatch.probes.perf_report import LEGACY_SAMPLE_FIELDS, SAMPLE_FIELDS, gpus_of, parse_gpu_run
from driftwatch.transport.base import CLIENT_GRACE, DEFAULT_MAX_OUTPUT, DEFAULT_PYTHONS, first_python

CPU_SECONDS = 3.0  # the CPU section's own budget (it stops itself); its command gets a little more
CPU_SHARES = {"gemm": 1.0, "copy": 1.0}
CPU_COMMAND_S = 15.0
PREFLIGHT_S = 10.0
MIN_GPU_S = 10.0  # less left for the GPU section: it is not started
DRIVER_MARGIN = 2.0  # the driver stops this long before the command's deadline, to report
RUN = {
    "gemm": {"n": 8192}, "hbm": {"bytes": 1 << 30}, "link": {"bytes": 256 << 20},
    "allreduce": {"bytes": 1 << 30, "warmup": 5, "iters": 20}, "batches": {"count": 10, "seconds": 0.05},
}
SAMPLE_MS = 200


class Budget:
    """The probe's hard bound, shared by its sections (and cut by --deadline)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        """The timeout for a command started now: it and the transport's grace past it end
        within the bound (and before the --deadline's cut)."""
        return interrupt.within(self.end - time.monotonic() - CLIENT_GRACE, margin=CLIENT_GRACE)

    def context(self, ctx: ProbeContext, cap: float) -> ProbeContext:
        """``ctx`` for one command: at most ``cap`` seconds, never past the bound."""
        return replace(ctx, timeout=max(min(cap, self.left()), 0.0))


def cpu_code() -> str:
    return load_script("perf_math.py") + "\n\n" + load_script("perf_cpu.py")


def driver_code() -> str:
    return load_script("perf_gpu.py")


def worker_code() -> str:
    return load_script("perf_math.py") + "\n\n" + load_script("perf_gpu_worker.py")


def parse_cpu_report(report: dict[str, Any]) -> dict[str, Any]:
    """The CPU section's facts from its script's report; a figure of a shape it does not
    know is an error, never a value."""
    section = {k: report.get(k) for k in ("backend", "numpy", "blas", "threads", "threads_from", "python",
                                          "cpu_model", "cpus")}
    figures = {}
    for name, figure in report["figures"].items():
        if isinstance(figure, dict) and figure.get("status") == "ok" and isinstance(figure.get("value"), (int, float)):
            figures[str(name)] = figure
        elif isinstance(figure, dict) and figure.get("status") in ("error", "skipped"):
            figures[str(name)] = {"status": figure["status"], "reason": str(figure.get("reason"))}
        else:
            figures[str(name)] = {"status": "error", "reason": "unreadable figure"}
    return {"status": "ok", "reason": None, **section, "figures": figures}


def cpu_section(ctx: ProbeContext, budget: Budget, floor: dict[str, float]) -> dict[str, Any]:
    request = {"seconds": min(CPU_SECONDS, max(budget.left() - 1.0, 0.5)), "shares": CPU_SHARES,
               "floors": {name: floor[f"cpu.{name}"] for name in CPU_SHARES if f"cpu.{name}" in floor}}
    pythons = [*ctx.watch.python, *DEFAULT_PYTHONS]
    started = time.monotonic()
    try:
        result = budget.context(ctx, CPU_COMMAND_S).run(
            first_python(cpu_code(), pythons, site=True), stdin=json.dumps(request).encode())
    except ProbeTimeout as exc:
        return {"status": "timeout", "reason": f"the CPU section {exc}", "figures": {}}
    duration = round(time.monotonic() - started, 2)
    if result.exit_code != 0:
        last = result.error_text.splitlines()[-1:]
        return {"status": "error", "reason": last[0] if last else f"exit {result.exit_code}", "figures": {}}
    try:
        section = parse_cpu_report(json_report(result.text, "perf CPU", ("figures",)))
    except ProbeError as exc:
        return {"status": "error", "reason": str(exc), "figures": {}}
    return {**section, "duration_s": duration}


def gpu_floors(floor: dict[str, float]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for key, value in floor.items():
        uuid, name = split_key(key)
        if uuid:
            out.setdefault(uuid, {})[name] = value
    return out


def gpu_section(ctx: ProbeContext, budget: Budget, floor: dict[str, float]) -> tuple[dict[str, Any], Facts, Any]:
    """(the section's status and context, per GPU, the all-reduce)."""
    try:
        preflight = run_preflight(budget.context(ctx, PREFLIGHT_S))
    except ProbeTimeout as exc:
        return {"status": "timeout", "reason": f"the nvidia-smi preflight {exc}"}, {}, None
    except ProbeError as exc:
        return {"status": "error", "reason": f"preflight: {exc}"}, {}, None
    if preflight.missing or preflight.no_devices or not preflight.gpus:
        why = "no nvidia-smi on this host" if preflight.missing else "nvidia-smi lists no GPU"
        return {"status": "skipped", "reason": why}, {}, None
    busy = refusal(preflight)
    if busy is not None:
        return {"status": "refused", "reason": busy, "context": {"driver": preflight.driver_version}}, gpus_of(preflight), None
    if budget.left() < MIN_GPU_S:
        return ({"status": "timeout", "reason": f"not started: less than {MIN_GPU_S:g}s left of the perf bound"},
                gpus_of(preflight), None)
    return run_gpus(ctx, budget, preflight, floor)


def run_gpus(ctx: ProbeContext, budget: Budget, preflight: Preflight, floor: dict[str, float]) -> tuple[
        dict[str, Any], Facts, Any]:
    timeout = budget.left()
    order = sorted(preflight.gpus.items(), key=lambda item: item[1].get("index") if isinstance(item[1].get("index"), int) else 0)
    request = {
        "seconds": max(timeout - DRIVER_MARGIN, 1.0), "pythons": list(ctx.watch.python), "worker": worker_code(),
        "gpus": [{"uuid": uuid, "index": gpu.get("index"), "bus_id": gpu.get("bus_id")} for uuid, gpu in order],
        "sample_ms": SAMPLE_MS, "sample_fields": [SAMPLE_FIELDS, LEGACY_SAMPLE_FIELDS], "run": RUN,
        "floors": gpu_floors(floor), "all_reduce_floor": floor.get("all_reduce"),
    }
    code = driver_code()
    started = time.monotonic()
    result = ctx.transport.run(first_python(code, DEFAULT_PYTHONS), timeout=timeout,
                               stdin=json.dumps(request).encode(), python=code)
    if result.exit_code is None and not result.timed_out:
        if interrupt.expired():
            raise ProbeTimeout("cut short at the --deadline")
        last = result.error_text.splitlines()[-1:]
        raise ProbeError(f"no result from the target: {last[0] if last else 'the GPU section ended without an exit status'}")
    if result.truncated:
        raise ProbeError(f"the GPU section's report passed the {DEFAULT_MAX_OUTPUT >> 20} MiB bound")
    run = parse_gpu_run(result.text, preflight, bound_s=budget.seconds, cut=result.timed_out)
    run.section["duration_s"] = round(time.monotonic() - started, 2)
    if result.survivors:  # in D state after SIGKILL: nobody can end them, so say they are there
        run.section["survivors"] = [str(s) for s in result.survivors]
    if not result.timed_out and '"kind": "done"' not in result.text:
        last = result.error_text.splitlines()[-1:]  # the driver itself failed: its last words
        run.section.update(status="error", reason=f"the GPU section failed: {last[0] if last else f'exit {result.exit_code}'}")
    return run.section, run.gpus, run.all_reduce


class PerfProbe:
    name = "perf"

    def collect(self, ctx: ProbeContext) -> Facts:
        if not ctx.watch.perf:
            raise ProbeSkipped("not asked for (snapshot --perf, or [watch] perf = true)")
        budget = Budget(ctx.watch.perf_timeout)
        previous = ctx.previous if ctx.previous.get("version") == VERSION else {}
        floor = floors(previous)
        cpu = cpu_section(ctx, budget, floor)
        gpu, gpus, all_reduce = gpu_section(ctx, budget, floor)
        facts: Facts = {"version": VERSION, "bound_s": budget.seconds, "cpu": cpu, "gpu": gpu, "gpus": gpus,
                        "all_reduce": all_reduce}
        facts["history"] = carry(previous, facts)
        return facts
