"""The ``modules`` probe: the kernel modules the GPU stack depends on, and the RDMA devices.

NVIDIA's kernel modules (``nvidia``, ``nvidia_uvm``, ``nvidia_peermem``, ``nvidia_fs``) and the
RDMA stack (``ib_core``, ``mlx5_core``) are what CUDA, NCCL's InfiniBand transport and
GPUDirect RDMA stand on. They fail quietly: ``nvidia_peermem`` is not loaded after a reboot
unless something loads it (NVIDIA/nccl #1343), an OS upgrade replaces ``nv_peer_mem`` by
``nvidia_peermem`` and NCCL up to 2.22.3 no longer finds GPUDirect RDMA (NVIDIA/nccl #1676), a
kernel update without a DKMS build leaves no NVIDIA module to load. NCCL decides on GPUDirect
RDMA from ``/sys/kernel/mm/memory_peers/nv_mem/version`` (nv_peer_mem's client) or
``/sys/module/nvidia_peermem/version``; this probe reads the same places.

``scripts/modules_collect.py`` reads ``/sys/module``, ``/lib/modules/<release>/modules.dep``,
``/var/lib/dkms``, ``/sys/kernel/mm/memory_peers`` and ``/sys/class/infiniband``; what it
could not read is recorded with its reason, never as "not loaded".
"""

from __future__ import annotations

from typing import Any

from driftwatch.probes.base import Facts, ProbeContext, collect_json

# The modules the stack depends on, recorded loaded or not (and every loaded nvidia*).
MODULES = (
    "nvidia", "nvidia_uvm", "nvidia_modeset", "nvidia_drm",  # the driver
    "nvidia_peermem", "nv_peer_mem",  # GPUDirect RDMA: the driver's module, and the older Mellanox one
    "nvidia_fs", "gdrdrv",  # GPUDirect Storage, GDRCopy
    "ib_core", "ib_uverbs", "rdma_ucm", "mlx5_core", "mlx5_ib",  # the RDMA stack
)
PREFIXES = ("nvidia",)
NO_VERSION = "no version file in /sys/module/{} (in-tree modules carry none: the kernel's release is theirs)"


def module_facts(name: str, raw: dict[str, Any], modules_error: str | None, files: dict[str, str] | None,
                 files_error: str | None) -> dict[str, Any]:
    """One module's facts from the collector's /sys/module entry (pure)."""
    entry: dict[str, Any] = {"loaded": None, "state": None, "version": None, "srcversion": None,
                             "version_error": None, "error": None, "file": None, "file_error": files_error,
                             "holders": [], "volatile": {"refcount": None}}
    if files is not None:
        entry["file"] = files.get(name)
    if modules_error:
        entry["error"] = modules_error
        return entry
    if not raw.get("present"):
        entry["loaded"] = False
        return entry
    if raw.get("initstate_error"):
        entry["error"] = f"/sys/module/{name}/initstate: {raw['initstate_error']}"
        return entry
    # A loadable module has an initstate; a built-in one has a /sys/module entry without it.
    entry["state"] = raw.get("initstate") or "built-in"
    entry["loaded"] = entry["state"] in ("live", "coming", "built-in")
    entry["version"], entry["srcversion"] = raw.get("version"), raw.get("srcversion")
    if raw.get("version_error"):
        entry["version_error"] = f"/sys/module/{name}/version: {raw['version_error']}"
    elif entry["version"] is None:
        entry["version_error"] = NO_VERSION.format(name)
    entry["holders"] = sorted(str(h) for h in raw.get("holders") or [])
    refcount = raw.get("refcnt")
    entry["volatile"]["refcount"] = int(refcount) if isinstance(refcount, str) and refcount.isdigit() else None
    return entry


def build_facts(report: dict[str, Any]) -> Facts:
    """The probe's facts from the collector's report (pure: tested without a target)."""
    raw_modules = report.get("modules") or {}
    modules_error = report.get("modules_error")
    names = list(dict.fromkeys([*MODULES, *sorted(raw_modules)]))
    files, files_error = report.get("files"), report.get("files_error")
    rdma = {name: _device(raw) for name, raw in sorted((report.get("rdma") or {}).items())}
    return {
        "kernel": report.get("kernel"),
        "modules": {name: module_facts(name, raw_modules.get(name) or {}, modules_error, files, files_error)
                    for name in names},
        "modules_error": modules_error,
        "dkms": report.get("dkms"),
        "dkms_error": report.get("dkms_error"),
        "memory_peers": dict(sorted((report.get("memory_peers") or {}).items())),
        "memory_peers_error": report.get("memory_peers_error"),
        "rdma": rdma,
        "rdma_error": report.get("rdma_error"),
    }


def _device(raw: dict[str, Any]) -> dict[str, Any]:
    return {
        "node_type": raw.get("node_type"),
        "hca_type": raw.get("hca_type"),
        "fw_ver": raw.get("fw_ver"),
        "ports": {str(port): dict(facts) for port, facts in sorted((raw.get("ports") or {}).items())},
        "errors": dict(raw.get("errors") or {}),
    }


class ModulesProbe:
    name = "modules"

    def collect(self, ctx: ProbeContext) -> Facts:
        request = {"modules": list(MODULES), "prefixes": list(PREFIXES)}
        report = collect_json(ctx, "modules_collect.py", request, what="modules", keys=())
        return build_facts(report)
