"""GPU power and clocks: caps and brakes that slow a GPU without an error.

Two states one snapshot shows: a power limit set below the board's default (every kernel
under load runs at lower clocks), and a clock event reason that holds the clocks down while
the GPU has nothing to do, which only the hardware, the board's power supply or a limit set
at or below idle draw explain.
"""

from __future__ import annotations

from typing import Any

from driftwatch.facts import fmt
from driftwatch.facts.read import Facts, as_dict
from driftwatch.facts.names import gpu_label
from driftwatch.rules.finding import Finding
from driftwatch.rules.host import Host, Missing
from driftwatch.severity import Severity

NVIDIA_SMI = "https://docs.nvidia.com/deploy/nvidia-smi/index.html"
CLOCK_REASONS = "https://docs.nvidia.com/deploy/nvml-api/group__nvmlClocksEventReasons.html"
BELOW_DEFAULT = 0.95
IDLE_PCT = 10  # utilization below this, with no compute process on the GPU: idle
# A SW power cap binds only near the limit. Far below it, the reason is a reading taken in a
# clock transition: a real GeForce RTX 2080 SUPER capture shows it at P8, 39 W of 250 W.
CAP_BINDS = 0.8
# (reason, severity, what it means) for reasons that have no business while idle.
IDLE_BRAKES: tuple[tuple[str, Severity, str], ...] = (
    ("hw_power_brake_slowdown", Severity.high,
     "the external power-brake signal is asserted (the board's or chassis' power supply): clocks are cut by half "
     "or more"),
    ("hw_thermal_slowdown", Severity.high, "the GPU is too hot even at idle: clocks are cut by half or more"),
    ("hw_slowdown", Severity.high, "a hardware slowdown (thermal, power brake or over-current) cuts clocks by half "
     "or more"),
    ("sw_thermal_slowdown", Severity.medium, "the driver holds clocks down for temperature while idle"),
    ("sw_power_cap", Severity.medium, "the driver holds clocks down for power while idle: the limit is at or below "
     "what the GPU draws doing nothing"),
)


def power_below_default(host: Host) -> list[Finding]:
    gpus = host.gpus()
    known = {u: g for u, g in gpus.items()
             if fmt.number(g.get("power_limit_w")) is not None and fmt.number(g.get("power_default_limit_w")) is not None}
    if not known:
        raise Missing("nvidia-smi reported no power limit and default power limit (older snapshot or driver)")
    findings = []
    for uuid, gpu in sorted(known.items()):
        limit, default = float(gpu["power_limit_w"]), float(gpu["power_default_limit_w"])
        if limit >= default * BELOW_DEFAULT:
            continue
        findings.append(Finding(
            severity=Severity.medium,
            why=f"{gpu_label(gpu, uuid)} runs with a power limit of {limit:g} W, below its default {default:g} W: "
                "under load it lowers its clocks to stay under the cap, so kernels, NCCL and decode run slower",
            fix=f"nvidia-smi -i {gpu.get('index', 0)} -pl {default:g} as root (or lift the DCGM or datacenter power "
                "policy that sets it); persistence mode keeps it across jobs",
            reference=NVIDIA_SMI,
            subjects=(("gpu", uuid),),
            key=uuid,
        ))
    return findings


def clocks_held_while_idle(host: Host) -> list[Finding]:
    gpus = host.gpus()
    readings = {u: as_dict(as_dict(g.get("volatile")).get("clock_event_reasons")) for u, g in gpus.items()}
    if not any(readings.values()):
        error = host.gpu().get("clock_reasons_error")
        raise Missing(f"nvidia-smi reported no clock event reasons ({error or 'older snapshot'})")
    busy = _busy_gpus(host.gpu())
    findings = []
    for uuid, reasons in sorted(readings.items()):
        gpu = gpus[uuid]
        if not reasons or uuid in busy or not _idle(gpu):
            continue
        for reason, severity, meaning in IDLE_BRAKES:
            if reasons.get(reason) is not True or (reason == "sw_power_cap" and not _cap_binds(gpu)):
                continue
            findings.append(Finding(
                severity=severity,
                why=f"{gpu_label(gpu, uuid)} reports {reason} while idle ({_reading(gpu)}): {meaning}; "
                    "every job on it runs slower",
                fix=_fix(reason, gpu),
                reference=CLOCK_REASONS,
                subjects=(("gpu", uuid),),
                key=f"{uuid}:{reason}",
                observed=True,
            ))
            break  # the most severe reason of this GPU says it
    return findings


def _busy_gpus(gpu_facts: Facts) -> set[str]:
    processes = gpu_facts.get("processes")
    if not isinstance(processes, dict):
        return set()
    return {str(as_dict(p).get("gpu_uuid")) for p in processes.values()}


def _idle(gpu: Facts) -> bool:
    volatile = as_dict(gpu.get("volatile"))
    util = fmt.number(volatile.get("utilization_gpu_pct"))
    return util is not None and util < IDLE_PCT


def _cap_binds(gpu: Facts) -> bool:
    draw = fmt.number(as_dict(gpu.get("volatile")).get("power_draw_w"))
    limit = fmt.number(gpu.get("power_enforced_limit_w")) or fmt.number(gpu.get("power_limit_w"))
    return draw is not None and limit is not None and draw >= limit * CAP_BINDS


def _reading(gpu: Facts) -> str:
    volatile = as_dict(gpu.get("volatile"))
    parts: list[Any] = [f"{fmt.number(volatile.get('utilization_gpu_pct')):g}% busy"]
    if fmt.number(volatile.get("power_draw_w")) is not None:
        parts.append(f"{volatile['power_draw_w']:g} W of {fmt.value(gpu.get('power_limit_w'))} W")
    if volatile.get("pstate"):
        parts.append(str(volatile["pstate"]))
    return ", ".join(str(p) for p in parts)


def _fix(reason: str, gpu: Facts) -> str:
    if reason in ("hw_power_brake_slowdown", "hw_slowdown"):
        return ("drain the host and check its power supplies and the BMC's power and brake events "
                "(ipmitool sel list); reseat the GPU's power cables")
    if reason in ("hw_thermal_slowdown", "sw_thermal_slowdown"):
        return "drain the host and check its fans, airflow and the GPU's thermal interface"
    return f"raise the limit: nvidia-smi -i {gpu.get('index', 0)} -pl {fmt.value(gpu.get('power_default_limit_w'))}"
