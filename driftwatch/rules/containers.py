"""What a server's container or limits do to it (the ``containers`` probe's facts).

Each rule reads the server's own limits, not the login shell's: docker's default 64 MiB
``/dev/shm`` under a multi-GPU server, a CPU quota far below the threads OpenMP and torch
start, a memlock limit too small for RDMA registrations on a host with InfiniBand/RoCE.
"""

from __future__ import annotations

from typing import Any

from driftwatch.facts import fmt
from driftwatch.facts.read import Facts, as_dict
from driftwatch.rules.finding import Finding
from driftwatch.rules.host import Host, Missing
from driftwatch.severity import Severity

SHM_ISSUE = "https://github.com/NVIDIA/nccl/issues/342"  # NCCL failing on docker's 64 MiB /dev/shm
SHM_FIX_PR = "https://github.com/sgl-project/sglang/pull/1986"
CPU_ISSUE = "https://github.com/vllm-project/vllm/issues/9113"  # a pod's CPU limit vs the node's CPUs
NCCL_TROUBLESHOOTING = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html"
DOCKER_SHM_DEFAULT = 64 << 20
SHM_NEARLY_FULL = 0.10  # free space below this share of the size
MEMLOCK_ENOUGH = 1 << 30  # below this (and not unlimited) RDMA registrations of NCCL's buffers fail


def _servers(host: Host) -> dict[str, Facts]:
    servers = {k: s for k, s in as_dict(host.facts("containers").get("servers")).items() if isinstance(s, dict)}
    if not servers:
        raise Missing("no running server's limits were read")
    return servers


def _gpus_used(host: Host, key: str) -> int | None:
    """GPUs one server uses on this host: its TP × PP from its own argv."""
    args = as_dict(as_dict(host.servers().get(key)).get("args")) if host.has("processes") else {}
    size = 1
    found = False
    for names in (("tp_size", "tensor_parallel_size"), ("pp_size", "pipeline_parallel_size")):
        value = next((args.get(n) for n in names if args.get(n) is not None), None)
        value = value[-1] if isinstance(value, list) and value else value
        if isinstance(value, str) and value.isdigit():
            size *= int(value)
            found = True
        elif isinstance(value, int):
            size *= value
            found = True
    return size if found else None


def _where(server: Facts, key: str) -> str:
    container = as_dict(server.get("container"))
    return f"server {key}" + (f" (container {container.get('label') or container.get('name')})" if container else "")


def _shm_fix(server: Facts) -> str:
    container = as_dict(server.get("container"))
    if container.get("pod"):
        return "mount an emptyDir with medium: Memory at /dev/shm in the pod spec (sizeLimit ≥ 16Gi), then restart the pod"
    if container:
        return f"start the container with a larger /dev/shm ({container.get('runtime') or 'docker'} run --shm-size 32g, or --ipc=host)"
    return "remount /dev/shm larger (mount -o remount,size=32G /dev/shm)"


def shm_too_small(host: Host) -> list[Finding]:
    findings = []
    for key, server in sorted(_servers(host).items()):
        shm = as_dict(server.get("shm"))
        size, gpus = shm.get("size"), _gpus_used(host, key)
        if shm.get("error") or not isinstance(size, int) or not gpus or gpus < 2:
            continue
        subjects = (("process", f"{key} /dev/shm"),)
        free = as_dict(shm.get("volatile")).get("free")
        if size <= DOCKER_SHM_DEFAULT:
            why = (f"{_where(server, key)} runs on {gpus} GPUs with a {fmt.size(size)} /dev/shm (docker's default is "
                   "64 MiB): NCCL's shared-memory transport cannot create its segments there ('failed to extend "
                   "/dev/shm/nccl-…'), and the server fails or falls back to slower paths")
            findings.append(Finding(Severity.high, why, _shm_fix(server), f"{SHM_ISSUE}; {SHM_FIX_PR}", subjects, key))
        elif isinstance(free, int) and free < size * SHM_NEARLY_FULL:
            why = f"{_where(server, key)}'s /dev/shm is nearly full ({fmt.size(free)} free of {fmt.size(size)})"
            findings.append(Finding(Severity.medium, why, "remove stale segments or give the server a larger /dev/shm",
                                    SHM_ISSUE, subjects, key, observed=True))
        if shm.get("stale_nccl_segments"):
            why = (f"{_where(server, key)}'s /dev/shm holds {shm['stale_nccl_segments']} NCCL segments older than the "
                   f"server ({fmt.size(shm.get('stale_nccl_bytes'))}): left by a run that did not exit cleanly, they "
                   "take the room this one needs")
            findings.append(Finding(Severity.medium, why, "remove the /dev/shm/nccl-* files no running process holds",
                                    SHM_ISSUE, subjects, f"{key}: stale", observed=True))
    return findings


def _threads_started(server: Facts) -> tuple[int | None, str]:
    threads = as_dict(server.get("threads"))
    env = as_dict(threads.get("env"))
    omp = str(env.get("OMP_NUM_THREADS") or "")
    if omp.isdigit():
        return int(omp), f"OMP_NUM_THREADS={omp}"
    count = threads.get("cpus_allowed_count")
    return (count if isinstance(count, int) else None), "OMP_NUM_THREADS unset: one per CPU it may run on"


def cpu_limit_below_threads(host: Host) -> list[Finding]:
    findings = []
    for key, server in sorted(_servers(host).items()):
        limit = as_dict(server.get("cgroup")).get("cpu_limit")
        started, how = _threads_started(server)
        if not isinstance(limit, (int, float)) or started is None or started <= max(1.0, limit) * 2:
            continue
        why = (f"{_where(server, key)} may use {limit:g} CPUs (its cgroup's quota) but OpenMP and torch start "
               f"{started} threads ({how}): they are throttled in turns, and tokenization, scheduling and CPU ops stall")
        fix = f"set OMP_NUM_THREADS={max(1, int(limit))} in the server's environment, or raise the CPU limit"
        subjects = (("process", f"{key} cpu limit"), ("env", "OMP_NUM_THREADS"))
        findings.append(Finding(Severity.medium, why, fix, CPU_ISSUE, subjects, key))
    return findings


def _memlock(server: Facts) -> Any:
    return as_dict(as_dict(as_dict(server.get("limits")).get("memlock"))).get("soft")


def memlock_small_with_rdma(host: Host) -> list[Finding]:
    devices = as_dict(host.facts("containers").get("kernel")).get("rdma_devices")
    if devices is None:
        raise Missing("the host's RDMA devices (/sys/class/infiniband) were not read")
    if not devices:
        return []
    findings = []
    for key, server in sorted(_servers(host).items()):
        memlock = _memlock(server)
        if memlock == "unlimited" or not isinstance(memlock, int) or memlock >= MEMLOCK_ENOUGH:
            continue
        why = (f"{_where(server, key)} may lock only {fmt.size(memlock)} of memory on a host with RDMA devices "
               f"({fmt.listing(list(devices))}): NCCL's InfiniBand/RoCE transport registers its buffers and fails "
               "(ibv_reg_mr) or falls back to sockets")
        container = as_dict(server.get("container"))
        fix = ("run the container with --ulimit memlock=-1:-1" if container and not container.get("pod")
               else "raise the memlock limit to unlimited (LimitMEMLOCK=infinity, /etc/security/limits.conf, or the "
                    "container runtime's default ulimits)")
        findings.append(Finding(Severity.high, why, fix, NCCL_TROUBLESHOOTING, (("process", f"{key} memlock"),), key))
    return findings
