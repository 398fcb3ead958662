"""GPUDirect RDMA (the ``modules`` probe): what NCCL needs from the kernel to let the NIC reach
GPU memory, on a host that has RDMA devices.

NCCL's InfiniBand transport uses GPUDirect RDMA only when it finds a peer-memory module:
``/sys/kernel/mm/memory_peers/nv_mem/version`` (nv_peer_mem), ``…/nv_mem_nc/version`` or, from
NCCL 2.23, ``/sys/module/nvidia_peermem/version`` (src/transport/net_ib.cc). Without one it logs
``NET/IB : GPU Direct RDMA Disabled for HCA`` and stages every transfer through host memory:
all-reduce across two nodes fell from ~180 GB/s to ~10 GB/s in NVIDIA/nccl #1676.
"""

from __future__ import annotations

from collections.abc import Iterator

from packaging.version import InvalidVersion, Version

from driftwatch.facts import fmt
from driftwatch.facts.kernel import GDR_MODULES, gdr_providers, rdma_devices
from driftwatch.facts.names import package_subjects
from driftwatch.facts.read import Facts, as_dict
from driftwatch.rules.finding import Finding, Subject
from driftwatch.rules.host import Host, Missing
from driftwatch.severity import Severity

NOT_LOADED_AFTER_REBOOT = "https://github.com/NVIDIA/nccl/issues/1343"
RENAMED = "https://github.com/NVIDIA/nccl/issues/1676"
# The first NCCL release that also looks for /sys/module/nvidia_peermem/version.
NCCL_FINDS_PEERMEM = Version("2.23.4")
SUBJECTS: tuple[Subject, ...] = (("driver", "GPUDirect RDMA"), *(("driver", m) for m in GDR_MODULES))


def gpudirect_rdma_missing(host: Host) -> list[Finding]:
    """RDMA devices and the NVIDIA driver loaded, but no peer-memory module: NCCL runs without
    GPUDirect RDMA."""
    facts, devices = _gpu_rdma_host(host)
    providers = gdr_providers(facts)
    if providers is None:
        raise Missing(f"the kernel modules could not be read: {facts.get('modules_error') or 'unknown'}")
    if providers:
        return []
    modules = as_dict(facts.get("modules"))
    peermem = as_dict(modules.get("nvidia_peermem"))
    kernel = fmt.value(facts.get("kernel"))
    if peermem.get("file"):
        state = f"{peermem['file']} is there for the running kernel {kernel} but not loaded (it does not load itself at boot)"
        fix = ("modprobe nvidia_peermem, and make it load at boot: "
               "echo nvidia-peermem > /etc/modules-load.d/nvidia-peermem.conf")
    elif peermem.get("file_error"):
        state = "neither nvidia_peermem nor nv_peer_mem is loaded"
        fix = "modprobe nvidia_peermem (or nv_peer_mem), and list it in /etc/modules-load.d"
    else:
        state = f"the running kernel {kernel} has no nvidia_peermem module and nv_peer_mem is not loaded"
        fix = ("install the NVIDIA driver's nvidia-peermem for this kernel (DKMS, or the driver package's "
               "kernel modules), then modprobe nvidia_peermem and list it in /etc/modules-load.d")
    return [Finding(
        severity=Severity.high,
        why=f"this host has RDMA devices {fmt.listing(devices)} but no GPUDirect RDMA module: {state}; NCCL logs "
            "'NET/IB : GPU Direct RDMA Disabled for HCA' and stages every inter-node transfer through host memory "
            "(unless it can use DMA-BUF: kernel 5.12+ with the open kernel modules)",
        fix=fix,
        reference=NOT_LOADED_AFTER_REBOOT,
        subjects=SUBJECTS,
        key="gpudirect-rdma",
    )]


def nccl_misses_peermem(host: Host) -> list[Finding]:
    """nvidia_peermem provides GPUDirect RDMA, but an installed NCCL older than 2.23.4 only
    looks for nv_peer_mem's memory_peers/nv_mem."""
    facts, devices = _gpu_rdma_host(host)
    providers = gdr_providers(facts)
    if providers is None:
        raise Missing(f"the kernel modules could not be read: {facts.get('modules_error') or 'unknown'}")
    if "nvidia_peermem" not in providers or any(p.startswith("memory_peers/") for p in providers):
        return []
    findings = []
    for name, version, where, subjects in _nccls(host):
        try:
            if Version(version) >= NCCL_FINDS_PEERMEM:
                continue
        except InvalidVersion:
            continue
        findings.append(Finding(
            severity=Severity.high,
            why=f"{name} {version}{where} looks only for nv_peer_mem (/sys/kernel/mm/memory_peers/nv_mem), but on "
                f"this host GPUDirect RDMA comes from the driver's nvidia_peermem: NCCL disables GPUDirect RDMA on "
                f"{fmt.listing(devices)} and stages transfers through host memory",
            fix="upgrade NCCL to 2.23.4 or newer (the wheel nvidia-nccl-cu12, or the system libnccl)",
            reference=RENAMED,
            subjects=(*SUBJECTS, *subjects),
            key=f"{name} {version}{where}",
        ))
    return findings


def _gpu_rdma_host(host: Host) -> tuple[Facts, list[str]]:
    facts = host.facts("modules")
    if facts.get("rdma_error"):
        raise Missing(f"the RDMA devices could not be read: {facts['rdma_error']}")
    devices = rdma_devices(facts)
    if not devices:
        raise Missing("no RDMA devices on this host")
    if not as_dict(as_dict(facts.get("modules")).get("nvidia")).get("loaded"):
        raise Missing("the NVIDIA kernel module is not loaded")
    return facts, devices


def _nccls(host: Host) -> Iterator[tuple[str, str, str, tuple[Subject, ...]]]:
    """Every NCCL this host can run: the nvidia-nccl-* wheels, and the versions a server logged."""
    try:
        for interp, name, dist in host.distributions():
            if name.startswith("nvidia-nccl-") and isinstance(dist.get("version"), str):
                yield name, str(dist["version"]), f" ({interp})", package_subjects(name)
    except Missing:
        pass
    for log in host.logs():
        for version in log.get("nccl_versions") or []:
            if isinstance(version, str):
                yield "NCCL", version, f" (loaded, per {log.get('path')})", ()
