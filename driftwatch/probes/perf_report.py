"""The GPU section's report (scripts/perf_gpu.py's JSON lines) turned into facts. Pure.

Every figure the run was to produce ends up with a value or a reason: what a worker never
reported is ``timeout`` when it was killed at the bound, ``error`` with its last words when
it died. nvidia-smi's samples taken meanwhile are summarised per GPU, and per figure over
the seconds that figure ran: clocks, power, the throttle reasons seen, the PCIe link.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from driftwatch.facts.figures import GPU_FIGURES, LINK_FIGURES, median
from driftwatch.probes.gpu import convert
from driftwatch.probes.perf_preflight import Preflight

# The fields sampled during the run, uuid first; older drivers call the reasons "throttle".
SAMPLE_FIELDS = ["uuid", "clocks.current.sm", "clocks.current.memory", "power.draw", "power.limit",
                 "clocks_event_reasons.active", "pcie.link.gen.current", "pcie.link.width.current", "temperature.gpu"]
LEGACY_SAMPLE_FIELDS = [f.replace("clocks_event_reasons", "clocks_throttle_reasons") for f in SAMPLE_FIELDS]
# NVML's clocks event (throttle) reasons, by bit; GPU_IDLE is no slowdown.
REASONS = {
    0x2: "APPLICATIONS_CLOCKS_SETTING", 0x4: "SW_POWER_CAP", 0x8: "HW_SLOWDOWN", 0x10: "SYNC_BOOST",
    0x20: "SW_THERMAL_SLOWDOWN", 0x40: "HW_THERMAL_SLOWDOWN", 0x80: "HW_POWER_BRAKE_SLOWDOWN",
    0x100: "DISPLAY_CLOCK_SETTING",
}
# What the preflight learnt of each GPU that a figure depends on, kept beside its figures.
GPU_KEYS = ("index", "name", "bus_id", "compute_cap", "memory_total_mib", "power_limit_w", "persistence_mode",
            "sm_clock_max_mhz", "mem_clock_max_mhz", "pcie_gen_max", "pcie_width_max")
_FIGURE_DROP = ("kind", "gpu", "name", "t0", "t1")


def throttle_reasons(mask: Any) -> list[str]:
    """The names of the reasons set in an ``0x...`` mask (GPU_IDLE left out); [] for none."""
    try:
        bits = int(str(mask), 16) if str(mask).lower().startswith("0x") else int(str(mask))
    except ValueError:
        return []
    return [name for bit, name in sorted(REASONS.items()) if bits & bit]


@dataclass
class Sample:
    t: float
    sm_mhz: float | None
    mem_mhz: float | None
    power_w: float | None
    power_limit_w: float | None
    reasons: list[str]
    pcie_gen: int | None
    pcie_width: int | None
    temperature_c: float | None


def parse_sample(row: str, fields: list[str], t: float) -> tuple[str, Sample] | None:
    cells = [c.strip() for c in row.split(", ")]
    if len(cells) != len(fields):
        return None
    values = dict(zip(fields, cells, strict=True))
    reasons = values.get("clocks_event_reasons.active") or values.get("clocks_throttle_reasons.active")

    def num(name: str, kind: type = float) -> Any:
        value = convert(values.get(name, ""), kind)
        return value if isinstance(value, (int, float)) else None

    return values.get("uuid", ""), Sample(
        t, num("clocks.current.sm"), num("clocks.current.memory"), num("power.draw"), num("power.limit"),
        throttle_reasons(reasons) if reasons else [], num("pcie.link.gen.current", int),
        num("pcie.link.width.current", int), num("temperature.gpu"),
    )


def _median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return round(median(known), 1) if known else None


def during(samples: list[Sample], link: bool = False) -> dict[str, Any] | None:
    """What nvidia-smi showed over some seconds of the run; None with no sample."""
    if not samples:
        return None
    seen: dict[str, int] = {}
    for sample in samples:
        for reason in sample.reasons:
            seen[reason] = seen.get(reason, 0) + 1
    sm = [s.sm_mhz for s in samples if s.sm_mhz is not None]
    out: dict[str, Any] = {
        "samples": len(samples),
        "sm_clock_mhz": _median(sm), "sm_clock_min_mhz": min(sm) if sm else None,
        "mem_clock_mhz": _median([s.mem_mhz for s in samples]),
        "power_w": _median([s.power_w for s in samples]),
        "power_limit_w": _median([s.power_limit_w for s in samples]),
        "temperature_max_c": max((s.temperature_c for s in samples if s.temperature_c is not None), default=None),
        # Share of the samples with each reason set: SW_POWER_CAP all along is a GPU at its limit.
        "throttle": {reason: round(count / len(samples), 2) for reason, count in sorted(seen.items())},
    }
    if link:
        gens = [s.pcie_gen for s in samples if s.pcie_gen is not None]
        widths = [s.pcie_width for s in samples if s.pcie_width is not None]
        out["pcie_gen"], out["pcie_width"] = (max(gens) if gens else None), (max(widths) if widths else None)
    return out


@dataclass
class GpuRun:
    """The GPU section as facts: the section's status, per GPU, and the all-reduce."""

    section: dict[str, Any]
    gpus: dict[str, dict[str, Any]] = field(default_factory=dict)
    all_reduce: dict[str, Any] | None = None


def gpus_of(preflight: Preflight) -> dict[str, dict[str, Any]]:
    return {uuid: {k: gpu.get(k) for k in GPU_KEYS} for uuid, gpu in preflight.gpus.items()}


def parse_gpu_run(text: str, preflight: Preflight, *, bound_s: float, cut: bool) -> GpuRun:
    """The driver's lines; ``cut``: the run was stopped at the bound before it said done."""
    messages = [m for m in (_json(line) for line in text.splitlines()) if m is not None]
    section: dict[str, Any] = {"status": "ok", "reason": None, "python": None,
                               "context": {"driver": preflight.driver_version}}
    gpus = gpus_of(preflight)
    for gpu in gpus.values():
        gpu["figures"] = {}
    fields, samples, windows = SAMPLE_FIELDS, {}, {}
    all_reduce, workers, started = None, {}, None
    for message in messages:
        kind = message.get("kind")
        if kind == "python":
            section["python"] = message.get("python")
        elif kind == "context":
            section["context"] = {"driver": preflight.driver_version, **{
                k: message.get(k) for k in ("torch", "cuda", "cublas", "nccl", "cudnn")}}
        elif kind == "section":
            section.update(status=message.get("status"), reason=message.get("reason"))
        elif kind == "placement" and message.get("gpu") in gpus:
            gpus[message["gpu"]]["numa_node"] = message.get("numa_node")
        elif kind == "go":
            started = message.get("word")
        elif kind == "sample_fields" and isinstance(message.get("fields"), list):
            fields = [str(f) for f in message["fields"]]
        elif kind == "sample":
            parsed = parse_sample(str(message.get("row", "")), fields, float(message.get("t") or 0))
            if parsed is not None:
                samples.setdefault(parsed[0], []).append(parsed[1])
        elif kind == "figure" and message.get("gpu") in gpus and message.get("name") in GPU_FIGURES:
            name = str(message["name"])
            windows[(message["gpu"], name)] = (message.get("t0"), message.get("t1"))
            gpus[message["gpu"]]["figures"][name] = _figure(message)
        elif kind == "all_reduce":
            all_reduce = _figure(message)
            windows[("*", "all_reduce")] = (message.get("t0"), message.get("t1"))
        elif kind == "worker":
            workers[message.get("gpu")] = message
    if section["status"] != "ok":
        return GpuRun(section, gpus)
    if cut and not workers:
        section.update(status="timeout", reason=f"cut short at the perf bound of {bound_s:g}s before the GPUs were measured")
    for uuid, gpu in gpus.items():
        _missing_figures(gpu["figures"], workers.get(uuid), started, bound_s, cut)
        mine = sorted(samples.get(uuid, []), key=lambda s: s.t)
        gpu["during"] = during(mine)
        for name, figure in gpu["figures"].items():
            t0, t1 = windows.get((uuid, name), (None, None))
            if figure.get("status") == "ok" and isinstance(t0, (int, float)) and isinstance(t1, (int, float)):
                figure["during"] = during([s for s in mine if t0 <= s.t <= t1], link=name in LINK_FIGURES)
    return GpuRun(section, gpus, _all_reduce(all_reduce, len(gpus), workers, bound_s, cut))


def _json(line: str) -> dict[str, Any] | None:
    try:
        message = json.loads(line)
    except ValueError:
        return None
    return message if isinstance(message, dict) else None


def _figure(message: dict[str, Any]) -> dict[str, Any]:
    figure = {k: v for k, v in message.items() if k not in _FIGURE_DROP}
    if figure.get("status") == "ok" and not isinstance(figure.get("value"), (int, float)):
        return {"status": "error", "reason": "the worker reported no value"}
    return figure


def _missing_figures(figures: dict[str, Any], worker: dict[str, Any] | None, started: Any, bound_s: float,
                     cut: bool) -> None:
    """A reason for every figure the worker never reported: never an absent figure."""
    if worker is None and not cut:
        reason, status = "the GPU's worker never reported", "error"
    elif cut or (worker and worker.get("killed")):
        reason, status = f"cut short at the perf bound of {bound_s:g}s", "timeout"
    elif started == "stop":
        reason, status = "not measured: another GPU's worker failed to start, and GPUs are measured together", "error"
    else:
        rc = worker.get("rc") if worker else None
        words = (worker or {}).get("stderr") or ""
        reason, status = f"the GPU's worker exited (status {rc}){': ' + words if words else ''}", "error"
    for name in GPU_FIGURES:
        figures.setdefault(name, {"status": status, "reason": reason})


def _all_reduce(found: dict[str, Any] | None, ranks: int, workers: dict[Any, dict[str, Any]], bound_s: float,
                cut: bool) -> dict[str, Any]:
    if ranks < 2:
        return {"status": "skipped", "reason": "one GPU: nothing to all-reduce"}
    if found is not None:
        return found
    if cut or any(w.get("killed") for w in workers.values()):
        return {"status": "timeout", "reason": f"no result within the perf bound of {bound_s:g}s (an NCCL hang?)"}
    words = "; ".join(f"{w.get('stderr')}" for w in workers.values() if w.get("stderr"))
    return {"status": "error", "reason": "the all-reduce did not complete" + (f": {words}" if words else "")}
