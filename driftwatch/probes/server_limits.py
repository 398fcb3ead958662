"""The limits a server process runs under, parsed from what the walk read (pure).

For every watched server, in a container or not (the server's own, not the login shell's):
``/proc/PID/limits`` (memlock, nofile), the CPU quota, cpuset and memory limit of its cgroup
and of every parent (cgroup v1, v2 or both), its ``/dev/shm`` (size, free space, NCCL
segments older than the server), the thread settings in its environment and the CPUs it may
run on. Raw text comes from ``scripts/process_context.py``; tests drive these parsers with
captured real files.
"""

from __future__ import annotations

import re
from typing import Any

UNLIMITED = "unlimited"
THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TORCH_NUM_THREADS")
_LIMIT_ROWS = {"Max locked memory": "memlock", "Max open files": "nofile", "Max processes": "nproc"}


def parse_limits(text: str | None) -> dict[str, Any]:
    """{"memlock": {"soft", "hard"}, "nofile": …} from /proc/PID/limits; a value is an int
    or "unlimited"."""
    if not text:
        return {"error": "/proc/PID/limits could not be read"}
    out: dict[str, Any] = {}
    for line in text.splitlines()[1:]:
        for label, key in _LIMIT_ROWS.items():
            if line.startswith(label):
                words = line[len(label):].split()
                if len(words) >= 2:
                    out[key] = {"soft": _limit(words[0]), "hard": _limit(words[1])}
    out["error"] = None
    return out


def _limit(word: str) -> int | str | None:
    if word == UNLIMITED:
        return UNLIMITED
    return int(word) if word.isdigit() else None


def cpu_count(cpus: str | None) -> int | None:
    """How many CPUs a list such as ``0-3,8,10-11`` names."""
    if not cpus or not cpus.strip():
        return None
    total = 0
    for part in cpus.strip().split(","):
        low, dash, high = part.partition("-")
        if not low.strip().isdigit() or (dash and not high.strip().isdigit()):
            return None
        total += int(high) - int(low) + 1 if dash else 1
    return total


def _quota(files: dict[str, str]) -> float | None:
    """CPUs a cgroup level allows (quota / period), None when unlimited or not set here."""
    if "cpu.max" in files:
        quota, _, period = files["cpu.max"].partition(" ")
        if quota == "max" or not quota.isdigit() or not period.strip().isdigit():
            return None
        return int(quota) / int(period)
    quota, period = files.get("cpu.cfs_quota_us"), files.get("cpu.cfs_period_us")
    if quota is None or period is None or not period.isdigit() or quota.startswith("-") or not quota.isdigit():
        return None
    return int(quota) / int(period)


def _memory(files: dict[str, str]) -> int | None:
    value = files.get("memory.max", files.get("memory.limit_in_bytes"))
    # cgroup v1 writes "no limit" as the largest page-aligned long (9223372036854771712).
    if value is None or not value.isdigit() or int(value) >= 1 << 62:
        return None
    return int(value)


def parse_cgroup_limits(levels: Any) -> dict[str, Any]:
    """The tightest CPU quota, cpuset and memory limit over the cgroup and its parents, with
    the cgroup that sets each."""
    out: dict[str, Any] = {"cpu_limit": None, "cpu_limit_at": None, "cpuset": None, "memory_limit": None,
                           "memory_limit_at": None}
    for level in levels if isinstance(levels, list) else []:
        files = level.get("files") if isinstance(level, dict) and isinstance(level.get("files"), dict) else {}
        where = str(level.get("path") or "/")
        quota = _quota(files)
        if quota is not None and (out["cpu_limit"] is None or quota < out["cpu_limit"]):
            out["cpu_limit"], out["cpu_limit_at"] = round(quota, 3), where
        cpus = files.get("cpuset.cpus.effective", files.get("cpuset.effective_cpus"))
        if cpus and out["cpuset"] is None:
            out["cpuset"] = cpus
        memory = _memory(files)
        if memory is not None and (out["memory_limit"] is None or memory < out["memory_limit"]):
            out["memory_limit"], out["memory_limit_at"] = memory, where
    return out


def parse_shm(raw: Any, started: float | None) -> dict[str, Any]:
    """/dev/shm as the server sees it; its NCCL segments older than the server are stale
    (left by an earlier run: NCCL names them nccl-* and unlinks them when it exits cleanly)."""
    if not isinstance(raw, dict) or raw.get("error"):
        return {"error": str(raw.get("error")) if isinstance(raw, dict) else "/dev/shm was not read"}
    segments = [s for s in raw.get("nccl_segments") or [] if isinstance(s, list) and len(s) == 2]
    stale = [s for s in segments if isinstance(started, (int, float)) and s[0] < started - 1]
    size, free = raw.get("size"), raw.get("free")
    return {
        "size": size, "error": None,
        "nccl_segments": len(segments), "stale_nccl_segments": len(stale),
        "stale_nccl_bytes": sum(int(s[1]) for s in stale),
        "volatile": {"free": free, "used": size - free if isinstance(size, int) and isinstance(free, int) else None},
    }


def parse_status(status: Any) -> dict[str, Any]:
    values = status if isinstance(status, dict) else {}
    ns_pid = str(values.get("NSpid") or "").split()
    thp = values.get("THP_enabled")
    return {
        "cpus_allowed": values.get("Cpus_allowed_list"),
        "cpus_allowed_count": cpu_count(values.get("Cpus_allowed_list")),
        "thp_enabled": None if thp is None else thp.strip() == "1",
        "ns_pid": int(ns_pid[-1]) if ns_pid and ns_pid[-1].isdigit() else None,
        "threads": int(values["Threads"]) if str(values.get("Threads") or "").isdigit() else None,
    }


_THP = re.compile(r"\[(\w+)\]")


def parse_kernel(raw: Any) -> dict[str, Any]:
    """NUMA balancing (0/1/2) and the transparent-hugepage modes the brackets select."""
    values = raw if isinstance(raw, dict) else {}
    numa = values.get("numa_balancing")
    out: dict[str, Any] = {"numa_balancing": int(numa) if isinstance(numa, str) and numa.isdigit() else None}
    devices = values.get("rdma_devices")
    out["rdma_devices"] = [str(d) for d in devices] if isinstance(devices, list) else None
    for key in ("thp_enabled", "thp_defrag"):
        match = _THP.search(str(values.get(key) or ""))
        out[key] = match.group(1) if match else None
    return out


def server_limits(context: Any, started: float | None) -> dict[str, Any]:
    """Everything above for one server, from its walk context."""
    if not isinstance(context, dict):
        return {"error": "the process walk read no context for this server"}
    status = parse_status(context.get("status"))
    env = context.get("env") if isinstance(context.get("env"), dict) else None
    threads = None if env is None else {k: v for k, v in env.items() if k in THREAD_ENV}
    return {
        "limits": parse_limits(context.get("limits")),
        "cgroup": parse_cgroup_limits(context.get("cgroup_limits")),
        "shm": parse_shm(context.get("shm"), started),
        "threads": {
            "env": threads,
            "cpus_allowed": status["cpus_allowed"],
            "cpus_allowed_count": status["cpus_allowed_count"],
            "thp_enabled": status["thp_enabled"],
            "volatile": {"threads": status["threads"]},
        },
        "error": None,
    }
