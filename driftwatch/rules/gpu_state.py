"""GPU state: errors, links, modes and memory that break or slow a server on this host."""

from __future__ import annotations

from typing import Any

from driftwatch.facts import fmt
from driftwatch.severity import Severity
from driftwatch.facts.read import Facts, as_dict
from driftwatch.facts.names import gpu_label
from driftwatch.facts.launch import memory_failure
from driftwatch.rules.finding import Finding
from driftwatch.rules.host import Host, Missing
from driftwatch.rules.launch import world_size

MEMORY_ERRORS = "https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/index.html"
NVIDIA_SMI = "https://docs.nvidia.com/deploy/nvidia-smi/index.html"
PERSISTENCE = "https://docs.nvidia.com/deploy/driver-persistence/index.html"
MIG = "https://docs.nvidia.com/datacenter/tesla/mig-user-guide/index.html"
VLLM_FREE = "https://docs.vllm.ai/en/latest/configuration/conserving_memory.html"
SGLANG_MEMORY = "https://docs.sglang.ai/advanced_features/server_arguments.html#memory-and-scheduling"
BUSY_PCT = 10  # a link below its maximum on an idle GPU is power saving, not a fault
HOLDS_MIB = 1024  # a process holding less is a CUDA context, not a competitor


def uncorrected_ecc(host: Host) -> list[Finding]:
    gpus = host.gpus()
    counters = {uuid: g.get("ecc_uncorrected_volatile") for uuid, g in gpus.items()}
    if all(not isinstance(c, int) for c in counters.values()):
        raise Missing("nvidia-smi reported no ECC error counters (ECC off or not supported)")
    return [
        Finding(
            severity=Severity.critical,
            why=f"{gpu_label(gpus[uuid], uuid)} has {count} uncorrected ECC error{'s' if count != 1 else ''} since "
                "the driver loaded: results on it cannot be trusted and further errors may crash jobs",
            fix="drain the host: stop its jobs, reset the GPU (nvidia-smi -r) or reboot, and replace it if errors return",
            reference=MEMORY_ERRORS,
            subjects=(("gpu", uuid),),
            key=uuid,
            observed=True,
        )
        for uuid, count in sorted(counters.items()) if isinstance(count, int) and count > 0
    ]


REPAIRS = (
    ("remapped_rows_failure", Severity.critical, "row remapping failed: the GPU has no spare rows left",
     "drain the host and replace the GPU"),
    ("remapped_rows_pending", Severity.high, "a memory row remap is pending until the GPU is reset",
     "drain the host, then reset the GPU (nvidia-smi -r) or reboot to complete the remap"),
    ("retired_pages_pending", Severity.high, "memory pages are pending retirement until the GPU is reset",
     "drain the host, then reset the GPU (nvidia-smi -r) or reboot to retire them"),
)


def pending_memory_repair(host: Host) -> list[Finding]:
    """A page retirement or row remap the driver recorded and only a reset applies (or a
    remap that failed): the bad memory is still in use until then."""
    gpus = host.gpus()
    if all(g.get(field) is None for g in gpus.values() for field, *_ in REPAIRS):
        raise Missing("nvidia-smi reported no retired-page or remapped-row state (older snapshot or GPU)")
    findings = []
    for uuid, gpu in sorted(gpus.items()):
        for field, severity, what, fix in REPAIRS:
            if gpu.get(field) == "Yes":
                findings.append(Finding(
                    severity=severity,
                    why=f"{gpu_label(gpu, uuid)}: {what}; jobs on it may hit memory errors until then",
                    fix=fix, reference=MEMORY_ERRORS, subjects=(("gpu", uuid),), key=f"{uuid}:{field}",
                    observed=True,
                ))
                break  # the most severe state of this GPU says it
    return findings


def pcie_degraded(host: Host) -> list[Finding]:
    gpus = host.gpus()
    if all(g.get("pcie_gen") is None and g.get("pcie_width") is None for g in gpus.values()):
        raise Missing("nvidia-smi reported no PCIe link state")
    findings = []
    for uuid, gpu in sorted(gpus.items()):
        busy = fmt.number(as_dict(gpu.get("volatile")).get("utilization_gpu_pct"))
        if busy is None or busy < BUSY_PCT:
            continue  # idle links step down to save power
        below = [
            f"{what} {now} of {most}" for what, now, most in (
                ("gen", gpu.get("pcie_gen"), gpu.get("pcie_gen_max")),
                ("width x", gpu.get("pcie_width"), gpu.get("pcie_width_max")),
            ) if isinstance(now, int) and isinstance(most, int) and now < most
        ]
        if below:
            width = any(b.startswith("width") for b in below)
            findings.append(Finding(
                severity=Severity.high if width else Severity.medium,
                why=f"{gpu_label(gpu, uuid)} runs its PCIe link at {', '.join(below).replace('x ', 'x')} while "
                    f"{busy:.0f}% busy: host transfers (weights loading, KV offload, NCCL over PCIe) are slower",
                fix="reseat the GPU or riser, check the slot's BIOS link settings, and look for AER errors in dmesg",
                reference=NVIDIA_SMI,
                subjects=(("gpu", uuid),),
                key=uuid,
                observed=True,
            ))
    return findings


def persistence_off(host: Host) -> list[Finding]:
    gpus = host.gpus()
    off = [uuid for uuid, g in sorted(gpus.items()) if g.get("persistence_mode") == "Disabled"]
    if not off:
        return []
    names = fmt.listing([gpu_label(gpus[u], u) for u in off])
    return [Finding(
        severity=Severity.low,
        why=f"persistence mode is off on {names}: the driver tears the GPU state down whenever no process "
            "holds it, so each start pays seconds of initialisation and settings like clocks are lost",
        fix="start nvidia-persistenced (systemctl enable --now nvidia-persistenced), or nvidia-smi -pm 1",
        reference=PERSISTENCE,
        subjects=tuple(("gpu", u) for u in off),
        key="persistence",
    )]


def mig_enabled(host: Host) -> list[Finding]:
    gpus, used = server_gpus(host)
    mig = [u for u in sorted(used) if gpus[u].get("mig_mode") == "Enabled"]
    if not mig:
        return []
    return [Finding(
        severity=Severity.high,
        why=f"MIG is enabled on {fmt.listing([gpu_label(gpus[u], u) for u in mig])}, which the {host.server_kind()} "
            "server expects as whole GPUs: it sees MIG slices (one per process), and NCCL cannot span them",
        fix="disable MIG on these GPUs (nvidia-smi -i N -mig 0, then reset the GPU), or run one server per slice",
        reference=MIG,
        subjects=tuple(("gpu", u) for u in mig),
        key="mig",
    )]


def other_process_memory(host: Host) -> list[Finding]:
    gpus, used = server_gpus(host)
    processes = host.gpu().get("processes")
    if not isinstance(processes, dict):
        raise Missing("nvidia-smi could not list the GPU compute processes")
    own = server_pids(host)
    findings = []
    for key, proc in sorted(processes.items()):
        proc = as_dict(proc)
        uuid, used_mib = str(proc.get("gpu_uuid")), fmt.number(proc.get("used_mib")) or 0.0
        name = str(proc.get("name") or "")
        if uuid not in used or used_mib < HOLDS_MIB or fmt.number(proc.get("pid")) in own:
            continue
        failure = memory_failure(host.snapshot)
        findings.append(Finding(
            severity=Severity.high,
            why=f"pid {proc.get('pid')} ({name or 'unknown'}) holds {fmt.gib(used_mib)} on {gpu_label(gpus[uuid], uuid)}, "
                f"which the {host.server_kind()} server uses: that memory is missing from its KV cache budget"
                + (f"; the log shows a memory failure: {failure}" if failure else ""),
            fix=f"stop pid {proc.get('pid')} or move it to a GPU the server does not use",
            reference=SGLANG_MEMORY if host.server_kind() == "sglang" else VLLM_FREE,
            subjects=(("gpu-process", str(key)), ("gpu", uuid)),
            key=str(key),
            observed=failure is not None,
        ))
    return findings


def server_pids(host: Host) -> set[float]:
    """The running servers' pids and their workers' (the ranks that hold the GPUs): another
    process is told from the server by its pid, never by its name (most GPU jobs are python)."""
    if not host.has("processes"):
        raise Missing("the processes probe did not read the servers: which GPU processes are theirs is unknown")
    pids: set[float] = set()
    for server in host.servers().values():
        volatile = as_dict(server.get("volatile"))
        workers = volatile.get("descendants")
        if not isinstance(workers, list):
            raise Missing("the snapshot does not record the server's worker processes (taken by an older driftwatch)")
        pids |= {n for n in (fmt.number(p) for p in [volatile.get("pid"), *workers]) if n is not None}
    return pids


def free_below_fraction(host: Host) -> list[Finding]:
    """Free memory below what the configured fraction needs, checked before the server
    holds memory of its own (no server running: it failed, or has not started)."""
    gpus, used = server_gpus(host)
    if host.servers():
        raise Missing("the server is running and holds memory of its own")
    kind, settings = host.server_kind(), host.launch()
    findings = []
    for uuid in sorted(used):
        gpu = gpus[uuid]
        free, total = fmt.number(gpu.get("memory_free_mib")), fmt.number(gpu.get("memory_total_mib"))
        if free is None or total is None:
            continue
        need, how = _need_mib(kind, settings, total, host)
        if need is None or free >= need:
            continue
        failure = memory_failure(host.snapshot)
        findings.append(Finding(
            severity=Severity.critical,
            why=f"{gpu_label(gpu, uuid)} has {fmt.gib(free)} free, but {how} needs {fmt.gib(need)} to start"
                + (f"; the log shows it failed: {failure}" if failure else ""),
            fix="free the GPU's memory (nvidia-smi shows who holds it), or lower the memory fraction",
            reference=SGLANG_MEMORY if kind == "sglang" else VLLM_FREE,
            subjects=(("gpu", uuid),),
            key=uuid,
            observed=failure is not None,
        ))
    return findings


def _need_mib(kind: str | None, settings: dict[str, Any], total: float, host: Host) -> tuple[float | None, str]:
    if kind == "vllm":
        util = fmt.number(settings.get("gpu_memory_utilization"))
        if util is None:
            return None, ""
        return total * util, f"--gpu-memory-utilization {util:g} ({util:g} × {fmt.gib(total)})"
    fraction = fmt.number(settings.get("mem_fraction_static"))
    if fraction is None:
        return None, ""
    weights = max((fmt.number(as_dict(r).get("weight_mem_gb")) or 0.0 for log in host.logs()
                   for r in as_dict(log.get("memory")).values()), default=0.0) * 1024
    reserve = total * (1 - fraction)
    return reserve + weights, (
        f"--mem-fraction-static {fraction:g} (weights {fmt.gib(weights)} + the {fmt.gib(reserve)} it leaves free)"
    )


def server_gpus(host: Host) -> tuple[dict[str, Facts], set[str]]:
    """The GPUs the server uses: those CUDA_VISIBLE_DEVICES exposes (the running server's,
    else the login shell's), the first TP × PP × DP of them when that is known."""
    gpus = host.gpus()
    if host.server_kind() is None:
        raise Missing("no server is running or logged: which GPUs one would use is unknown")
    visible = _visible(host, gpus)
    ordered = sorted(visible, key=lambda u: (as_dict(gpus[u]).get("index") or 0))
    needed = world_size(host)
    base = int(fmt.number(host.launch().get("base_gpu_id")) or 0)
    return gpus, set(ordered[base:base + needed] if needed else ordered)


def _visible(host: Host, gpus: dict[str, Facts]) -> list[str]:
    value = None
    try:
        sources = host.sources()
    except Missing:
        sources = []  # no environment read: nothing says which GPUs are hidden
    for source in sources:
        if source.server is not None or source.where == "login shell":
            value = source.values.get("CUDA_VISIBLE_DEVICES")
            if value is not None:
                break
    if value is None:
        return list(gpus)
    by_index = {str(g.get("index")): u for u, g in gpus.items()}
    found = []
    for word in (w.strip() for w in value.split(",")):
        if word in by_index:
            found.append(by_index[word])
        else:
            found += [u for u in gpus if word and u.startswith(word)]
    return list(dict.fromkeys(found))
