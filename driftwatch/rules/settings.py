"""Settings that cost throughput or break features, wherever they are set: a running
server's environment, the login shell's (what the next start gets), NCCL's config files.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from driftwatch.severity import Severity
from driftwatch.facts import fmt
from driftwatch.facts.read import as_dict
from driftwatch.rules.finding import Finding
from driftwatch.rules.host import Host, Missing, Source
from driftwatch.rules.launch import world_size

NCCL_ENV = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html"
CUDA_ENV = "https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#cuda-environment-variables"
EXPANDABLE = "https://github.com/vllm-project/vllm/issues/42609"
ALLOC_CONF = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")


@dataclass(frozen=True)
class Switch:
    """A variable whose non-zero value turns something off (or on) that costs throughput."""

    name: str
    severity: Severity
    effect: str
    reference: str


SWITCHES = {
    "nccl-p2p-disabled": Switch(
        "NCCL_P2P_DISABLE", Severity.high,
        "NCCL stops using NVLink and PCIe peer-to-peer and copies between GPUs through host memory: "
        "collectives get several times slower", f"{NCCL_ENV}#nccl-p2p-disable"),
    "nccl-ib-disabled": Switch(
        "NCCL_IB_DISABLE", Severity.medium,
        "NCCL will not use InfiniBand nor RoCE (both are its IB verbs transport) and falls back to "
        "TCP sockets between nodes", f"{NCCL_ENV}#nccl-ib-disable"),
    "nccl-shm-disabled": Switch(
        "NCCL_SHM_DISABLE", Severity.medium,
        "NCCL stops using shared memory between processes of this host: where peer-to-peer is not "
        "possible, traffic goes through the network stack", f"{NCCL_ENV}#nccl-shm-disable"),
    "cuda-launch-blocking": Switch(
        "CUDA_LAUNCH_BLOCKING", Severity.high,
        "every CUDA kernel launch waits for the GPU to finish (a debugging switch): throughput collapses",
        CUDA_ENV),
}


def switch_rule(rule: str) -> Callable[[Host], list[Finding]]:
    switch = SWITCHES[rule]

    def check(host: Host) -> list[Finding]:
        places = [s.where for s in _sources(host, switch.name) if _on(s.values.get(switch.name))]
        if not places:
            return []
        severity = switch.severity
        if switch.name == "NCCL_IB_DISABLE" and _multi_node(host):
            severity = Severity.high
        return [Finding(
            severity=severity,
            why=f"{switch.name}={_value(host, switch.name, places[0])} ({', '.join(places)}): {switch.effect}",
            fix=f"unset {switch.name} ({', '.join(places)}) unless it works around a known fault",
            reference=switch.reference,
            subjects=(("env", switch.name),),
            key=switch.name,
        )]

    check.__doc__ = f"{switch.name}=1: {switch.effect}."
    return check


def nccl_debug_unset(host: Host) -> list[Finding]:
    """A note: without NCCL_DEBUG the server's log has no NCCL version banner."""
    servers = [s for s in host.sources() if s.server is not None]
    if not servers:
        raise Missing("no running server's environment was read")
    conf = [s for s in host.sources() if s.server is None and s.where != "login shell"]
    if any("NCCL_DEBUG" in s.values for s in conf):
        return []
    unset = [s.where for s in servers if "NCCL_DEBUG" not in s.values]
    if not unset:
        return []
    return [Finding(
        severity=Severity.info,
        why=f"NCCL_DEBUG is not set ({', '.join(unset)}): the log does not record which NCCL version loaded",
        fix="set NCCL_DEBUG=VERSION (one line: the version) or NCCL_DEBUG=WARN in the server's environment",
        reference=f"{NCCL_ENV}#nccl-debug",
        subjects=(("env", "NCCL_DEBUG"),),
        key="NCCL_DEBUG",
    )]


def expandable_segments(host: Host) -> list[Finding]:
    """expandable_segments:True with tensor parallelism: custom all-reduce shares buffers with
    cudaIpcGetMemHandle, which rejects expandable-segment (VMM) memory."""
    places = [
        (s.where, name) for s in host.sources() for name in ALLOC_CONF
        if s.where == "login shell" or s.server is not None
        if "expandable_segments:true" in s.values.get(name, "").replace(" ", "").lower()
    ]
    if not places:
        return []
    settings = host.launch()
    tp = settings.get("tp_size", settings.get("tensor_parallel_size"))
    if not isinstance(tp, (int, float)):
        raise Missing("the server's tensor-parallel size is not known (no running server or log)")
    if tp <= 1 or settings.get("disable_custom_all_reduce") is True:
        return []
    where = ", ".join(f"{name} in {w}" for w, name in places)
    failed = [as_dict(e).get("message") for log in host.logs() for e in log.get("errors") or []
              if as_dict(e).get("kind") == "custom-allreduce" or "custom_all_reduce" in str(as_dict(e).get("message"))]
    return [Finding(
        severity=Severity.high,
        why=f"expandable_segments:True ({where}) with tensor parallelism {tp:g}: custom all-reduce shares "
            "its buffers through cudaIpcGetMemHandle, which rejects expandable-segment memory, so TP "
            "workers die at start ('custom_all_reduce.cuh … invalid argument') unless the server falls back"
            + (f"; the log shows it: {fmt.value(failed[0])}" if failed else ""),
        fix="drop expandable_segments:True, or start the server with --disable-custom-all-reduce",
        reference=EXPANDABLE,
        subjects=tuple(("env", name) for _, name in places) + (("launch-arg", "disable_custom_all_reduce"),),
        key="expandable_segments",
        observed=bool(failed),
    )]


def visible_devices(host: Host) -> list[Finding]:
    """CUDA_VISIBLE_DEVICES exposing fewer GPUs than the server's parallelism needs."""
    needed = world_size(host)
    if needed is None:
        raise Missing("the server's parallel sizes are not known (no running server or log)")
    short = []
    for source in host.sources():
        if source.server is None and source.where != "login shell":
            continue  # NCCL files cannot hide GPUs from CUDA
        value = source.values.get("CUDA_VISIBLE_DEVICES")
        if value is None:
            continue
        count = len([d for d in value.split(",") if d.strip()])
        if count < needed:
            short.append((source.where, value, count))
    if not short:
        return []
    where, value, count = short[0]
    places = ", ".join(w for w, _, _ in short)
    return [Finding(
        severity=Severity.critical,
        why=f"CUDA_VISIBLE_DEVICES={value} ({places}) exposes {count} GPU{'s' if count != 1 else ''}, but the "
            f"server's parallelism needs {needed}: it cannot place every rank",
        fix=f"list {needed} GPUs in CUDA_VISIBLE_DEVICES ({places}), or unset it",
        reference=CUDA_ENV,
        subjects=(("env", "CUDA_VISIBLE_DEVICES"), ("launch-arg", "tp_size"), ("launch-arg", "tensor_parallel_size")),
        key="CUDA_VISIBLE_DEVICES",
    )]


def _sources(host: Host, name: str) -> list[Source]:
    """Sources that apply ``name``: a server's environment and the login shell's always; an
    NCCL config file only for NCCL_* variables (NCCL sets them from the file)."""
    found = []
    for source in host.sources():
        if source.server is None and source.where != "login shell" and not name.startswith("NCCL_"):
            continue
        found.append(source)
    return found


def _value(host: Host, name: str, where: str) -> str:
    return next(s.values[name] for s in host.sources() if s.where == where)


def _on(value: str | None) -> bool:
    if value is None:
        return False
    try:
        return int(value.strip()) != 0
    except ValueError:
        return value.strip().lower() in ("true", "yes", "on")


def _multi_node(host: Host) -> bool:
    nnodes = host.launch().get("nnodes")
    return isinstance(nnodes, (int, float)) and nnodes > 1
