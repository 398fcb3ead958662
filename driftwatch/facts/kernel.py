"""What the kernel's module facts mean for GPUDirect RDMA (the ``modules`` probe), read the way
NCCL decides (src/transport/net_ib.cc): a loaded nvidia_peermem (NCCL 2.23+), or nv_peer_mem's
peer-memory clients under /sys/kernel/mm/memory_peers (every NCCL)."""

from __future__ import annotations

from driftwatch.facts.read import Facts, as_dict

GDR_MODULES = ("nvidia_peermem", "nv_peer_mem")
GDR_CLIENTS = ("nv_mem", "nv_mem_nc")


def gdr_providers(facts: Facts) -> list[str] | None:
    """The loaded modules and registered peer-memory clients that give NCCL GPUDirect RDMA;
    None when the modules could not be read."""
    modules = as_dict(facts.get("modules"))
    if facts.get("modules_error") or any(as_dict(modules.get(m)).get("loaded") is None for m in GDR_MODULES
                                         if m in modules):
        return None
    found = [m for m in GDR_MODULES if as_dict(modules.get(m)).get("loaded")]
    found += [f"memory_peers/{c}" for c in GDR_CLIENTS if c in as_dict(facts.get("memory_peers"))]
    return found


def rdma_devices(facts: Facts) -> list[str]:
    return sorted(as_dict(facts.get("rdma")))
