"""The limits a server runs under, old against new (the ``containers`` probe's per-server
``limits``, ``cgroup``, ``shm`` and ``threads``, and the host's ``kernel`` settings)."""

from __future__ import annotations

import re
from typing import Any

from driftwatch.facts import fmt
from driftwatch.diff.change import Change, Severity
from driftwatch.facts.read import Facts, as_dict

# NCCL pins host memory for its proxies and for InfiniBand/RoCE registrations (memlock);
# every connection and every shared-memory segment is a file descriptor (nofile).
LIMIT_WHY = {
    "memlock": "NCCL and InfiniBand/RoCE register (pin) host memory up to this limit",
    "nofile": "each NCCL connection, socket and shared-memory segment holds a file descriptor",
    "nproc": "threads and worker processes count against it",
}


def _limit_text(value: Any) -> str:
    if value == "unlimited":
        return "unlimited"
    if isinstance(value, int):
        return fmt.size(value) if value >= 1 << 20 else f"{value:,}"
    return fmt.value(value)


def _less(old: Any, new: Any) -> bool:
    """Whether limit ``new`` is tighter than ``old`` (unlimited is the loosest)."""
    if new == "unlimited" or old == new:
        return False
    return old == "unlimited" or (isinstance(old, int) and isinstance(new, int) and new < old)


def diff_limits(key: str, old: Facts, new: Facts, env_watched: set[str]) -> list[Change]:
    changes: list[Change] = []
    ol, nl = as_dict(old.get("limits")), as_dict(new.get("limits"))
    if not ol.get("error") and not nl.get("error"):
        for name, why in LIMIT_WHY.items():
            o, n = as_dict(ol.get(name)).get("soft"), as_dict(nl.get(name)).get("soft")
            if o != n and o is not None and n is not None:
                tighter = _less(o, n)
                severity = Severity.high if tighter and name == "memlock" else Severity.medium if tighter else Severity.low
                changes.append(Change("process", f"{key} {name}", o, n, severity,
                                      f"server {key}'s {name} limit {_limit_text(o)} → {_limit_text(n)}: {why}"))
    changes += _cgroup(key, as_dict(old.get("cgroup")), as_dict(new.get("cgroup")))
    changes += _shm(key, as_dict(old.get("shm")), as_dict(new.get("shm")))
    changes += _threads(key, as_dict(old.get("threads")), as_dict(new.get("threads")), env_watched)
    return changes


def _short_ids(path: Any) -> str:
    """A cgroup path with its 64-hex container ids cut to 12, as the runtimes print them."""
    return re.sub(r"([0-9a-f]{12})[0-9a-f]{52}", r"\1", str(path))


def _cpus(value: Any) -> str:
    return "no CPU limit" if value is None else f"{value:g} CPU" + ("" if value == 1 else "s")


def _cgroup(key: str, old: Facts, new: Facts) -> list[Change]:
    changes = []
    o, n = old.get("cpu_limit"), new.get("cpu_limit")
    if o != n and ("cpu_limit" in old and "cpu_limit" in new):
        tighter = n is not None and (o is None or n < o)
        where = f" (set by cgroup {_short_ids(new.get('cpu_limit_at'))})" if n is not None and new.get("cpu_limit_at") else ""
        changes.append(Change("process", f"{key} cpu limit", o, n, Severity.high if tighter else Severity.medium,
                              f"server {key}'s CPU quota {_cpus(o)} → {_cpus(n)}{where}: tokenizer, scheduler and "
                              "OpenMP threads beyond it are throttled", magnitude=abs((o or 0) - (n or 0))))
    if old.get("cpuset") != new.get("cpuset") and old.get("cpuset") and new.get("cpuset"):
        changes.append(Change("process", f"{key} cpuset", old.get("cpuset"), new.get("cpuset"), Severity.medium,
                              f"server {key} may now run on CPUs {new['cpuset']} (was {old['cpuset']})"))
    o, n = old.get("memory_limit"), new.get("memory_limit")
    if o != n and ("memory_limit" in old and "memory_limit" in new):
        tighter = n is not None and (o is None or n < o)
        text = (f"server {key}'s memory limit {fmt.size(o) if o else 'none'} → {fmt.size(n) if n else 'none'}"
                ": past it the kernel's OOM killer ends the server")
        changes.append(Change("process", f"{key} memory limit", o, n, Severity.high if tighter else Severity.medium, text))
    return changes


def _shm(key: str, old: Facts, new: Facts) -> list[Change]:
    if old.get("error") or new.get("error"):
        if new.get("error") and old.get("error") != new.get("error"):
            return [Change("process", f"{key} /dev/shm", None, new.get("error"), Severity.low,
                           f"server {key}'s /dev/shm could not be read: {fmt.value(new['error'])}")]
        return []
    o, n = old.get("size"), new.get("size")
    if o == n or not isinstance(o, int) or not isinstance(n, int):
        return []
    smaller = n < o
    text = f"server {key}'s /dev/shm {fmt.size(o)} → {fmt.size(n)}" + (
        ": NCCL's shared-memory transport and the DataLoader's workers need room there" if smaller else "")
    return [Change("process", f"{key} /dev/shm", o, n, Severity.high if smaller else Severity.low, text,
                   magnitude=abs(o - n) / max(o, n))]


def _threads(key: str, old: Facts, new: Facts, env_watched: set[str]) -> list[Change]:
    changes = []
    oe, ne = old.get("env"), new.get("env")
    if isinstance(oe, dict) and isinstance(ne, dict):
        for name in sorted((oe.keys() | ne.keys()) - env_watched):
            o, n = oe.get(name), ne.get(name)
            if o != n:
                text = (f"{name}={fmt.value(n)} is now set" if o is None else f"{name} (was {fmt.value(o)}) is no longer set"
                        if n is None else f"{name} {fmt.value(o)} → {fmt.value(n)}") + f" (server {key})"
                changes.append(Change("env", name, o, n, Severity.medium, text))
    o, n = old.get("cpus_allowed"), new.get("cpus_allowed")
    if o != n and o and n:
        changes.append(Change("process", f"{key} cpus allowed", o, n, Severity.medium,
                              f"server {key} is now pinned to CPUs {n} (was {o}): taskset, numactl or the cpuset"))
    return changes


def diff_kernel(old: Facts, new: Facts) -> list[Change]:
    changes = []
    o, n = old.get("numa_balancing"), new.get("numa_balancing")
    if o != n and o is not None and n is not None:
        changes.append(Change("system", "kernel.numa_balancing", o, n, Severity.medium,
                              f"kernel.numa_balancing {o} → {n}: automatic NUMA balancing migrates pages under "
                              "GPU-pinned buffers and costs all-to-all throughput when on"))
    for field, what in (("thp_enabled", "enabled"), ("thp_defrag", "defrag")):
        o, n = old.get(field), new.get(field)
        if o != n and o is not None and n is not None:
            changes.append(Change("system", f"transparent_hugepage/{what}", o, n, Severity.low,
                                  f"transparent hugepages {what} {o} → {n}: page faults and compaction stalls change"))
    return changes
