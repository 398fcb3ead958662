"""Kernel modules and RDMA devices (the ``modules`` probe).

What a module provides is the mechanism a change names: ``nvidia_peermem`` (or the older
``nv_peer_mem``) lets the NIC read and write GPU memory directly (GPUDirect RDMA), so losing it
on a host with RDMA devices makes NCCL's InfiniBand transport stage every transfer through host
memory; ``nvidia_uvm`` is what CUDA needs to create a context; ``ib_core``/``mlx5_core`` are the
InfiniBand transport itself. A module that could not be read is unknown, never "not loaded".
"""

from __future__ import annotations

from typing import Any

from driftwatch.diff.change import Change, Severity
from driftwatch.diff.context import DiffContext
from driftwatch.facts import fmt
from driftwatch.facts.kernel import GDR_MODULES, gdr_providers, rdma_devices
from driftwatch.facts.read import Facts, as_dict

KEYS = frozenset({"kernel", "modules", "modules_error", "dkms", "dkms_error", "memory_peers", "memory_peers_error",
                  "rdma", "rdma_error"})
ACTIVE = "ACTIVE"
# module → (severity when it is no longer loaded, what is lost)
PROVIDES: dict[str, tuple[Severity, str]] = {
    "nvidia": (Severity.critical, "no process can use the GPUs"),
    "nvidia_uvm": (Severity.critical, "CUDA cannot create a context ('CUDA driver initialization failed', "
                                      "cudaErrorNoDevice) in new processes"),
    "nvidia_fs": (Severity.medium, "GPUDirect Storage (cuFile) falls back to compatibility mode through host memory"),
    "gdrdrv": (Severity.medium, "GDRCopy is gone: NCCL and UCX fall back to slower host-staged copies"),
    "ib_core": (Severity.high, "the InfiniBand/RoCE stack is gone: NCCL falls back to TCP sockets between hosts"),
    "mlx5_core": (Severity.high, "the Mellanox NICs have no driver: NCCL falls back to TCP sockets between hosts"),
    "mlx5_ib": (Severity.high, "the Mellanox NICs have no RDMA driver: NCCL falls back to TCP sockets between hosts"),
    "ib_uverbs": (Severity.high, "user-space verbs are gone: NCCL cannot open the RDMA devices"),
}


def diff_modules(old: Facts, new: Facts, ctx: DiffContext) -> list[Change]:
    changes: list[Change] = []
    old_mods, new_mods = as_dict(old.get("modules")), as_dict(new.get("modules"))
    gdr = _gdr_change(old, new)
    changes += [gdr] if gdr else []
    unread = old.get("modules_error") or new.get("modules_error")  # said once, below
    for name in [] if unread else sorted(old_mods.keys() | new_mods.keys()):
        if gdr is not None and name in GDR_MODULES:
            continue  # said once, as GPUDirect RDMA
        changes += _module(name, as_dict(old_mods.get(name)), as_dict(new_mods.get(name)), new)
    changes += _dkms(old, new)
    changes += _rdma(as_dict(old.get("rdma")), as_dict(new.get("rdma")))
    for key in ("modules_error", "rdma_error", "memory_peers_error", "dkms_error"):
        if old.get(key) != new.get(key):
            changes.append(_unreadable(key.removesuffix("_error"), old.get(key), new.get(key)))
    return changes


# ---- GPUDirect RDMA ------------------------------------------------------------------------


def _gdr_change(old: Facts, new: Facts) -> Change | None:
    before, after = gdr_providers(old), gdr_providers(new)
    if before is None or after is None or bool(before) == bool(after) and before[:1] == after[:1]:
        return None
    devices = rdma_devices(new) or rdma_devices(old)
    on = f" on this host with RDMA devices {fmt.listing(devices)}" if devices else ""
    if before and not after:
        text = (f"GPUDirect RDMA is lost{on}: {fmt.listing(before)} no longer loaded, so NCCL's InfiniBand transport "
                f"can no longer register GPU memory with the NIC ('NET/IB : GPU Direct RDMA Disabled for HCA') and "
                f"stages every transfer through host memory{_why_missing(new)}")
        return Change("driver", "GPUDirect RDMA", before, None, Severity.high if devices else Severity.medium, text,
                      magnitude=2.5)
    if after and not before:
        text = f"GPUDirect RDMA is available again{on}: {fmt.listing(after)} loaded"
        return Change("driver", "GPUDirect RDMA", None, after, Severity.low, text)
    text = (f"GPUDirect RDMA is now provided by {after[0]} instead of {before[0]} (an OS or driver upgrade replaces "
            "nv_peer_mem by the driver's nvidia_peermem): NCCL up to 2.22.3 looks only for nv_peer_mem's "
            "/sys/kernel/mm/memory_peers/nv_mem and then disables GPUDirect RDMA")
    return Change("driver", "GPUDirect RDMA", before, after, Severity.medium, text, magnitude=2.0)


def _why_missing(facts: Facts) -> str:
    """Whether the running kernel has the module at all (a reboot that did not load it) or not."""
    modules = as_dict(facts.get("modules"))
    peermem = as_dict(modules.get("nvidia_peermem"))
    kernel = facts.get("kernel")
    if peermem.get("file_error"):
        return ""
    if peermem.get("file"):
        return (f"; {peermem['file']} exists for the running kernel {fmt.value(kernel)} but nothing loads it at boot "
                "(modprobe nvidia_peermem, and list it in /etc/modules-load.d)")
    if "nvidia_peermem" in modules:
        return (f"; the running kernel {fmt.value(kernel)} has no nvidia_peermem module (the driver package or DKMS "
                "did not build it for this kernel)")
    return ""


# ---- one module ------------------------------------------------------------------------------


def _module(name: str, old: Facts, new: Facts, new_facts: Facts) -> list[Change]:
    if not old or not new:
        return []
    was, now = old.get("loaded"), new.get("loaded")
    if was is None or now is None:
        if old.get("error") == new.get("error"):
            return []
        return [_unreadable(f"module {name}", old.get("error"), new.get("error"))]
    if was and not now:
        severity, lost = PROVIDES.get(name, (Severity.medium, "what it provides is gone"))
        text = f"kernel module {name} is no longer loaded (was {fmt.value(old.get('version') or old.get('state'))}): {lost}"
        return [Change("driver", name, _label(old), None, severity, text, magnitude=2.0)]
    if now and not was:
        text = f"kernel module {name} {fmt.value(new.get('version') or new.get('state'))} is now loaded"
        return [Change("driver", name, None, _label(new), Severity.low, text)]
    changes = []
    if now and old.get("version") != new.get("version"):
        text = f"kernel module {name} {fmt.value(old.get('version'))} → {fmt.value(new.get('version'))}"
        severity = Severity.high if name.startswith("nvidia") else Severity.medium
        changes.append(Change("driver", name, old.get("version"), new.get("version"), severity, text))
    if not old.get("file_error") and not new.get("file_error") and old.get("file") != new.get("file"):
        kernel = fmt.value(new_facts.get("kernel"))
        if new.get("file"):
            text = f"the running kernel {kernel} has a {name} module again: {new['file']}"
            severity = Severity.low
        else:
            text = (f"the running kernel {kernel} has no {name} module any more (was {old.get('file')}): it cannot be "
                    "loaded (after a kernel update, DKMS or the driver package did not build it)")
            severity = Severity.high if name in PROVIDES or name in GDR_MODULES else Severity.medium
        changes.append(Change("driver", f"{name} module file", old.get("file"), new.get("file"), severity, text))
    return changes


def _label(entry: Facts) -> str:
    return str(entry.get("version") or entry.get("state") or "loaded")


def _dkms(old: Facts, new: Facts) -> list[Change]:
    """DKMS builds of the running kernel that went away (the module cannot load after a reboot)."""
    if old.get("dkms_error") or new.get("dkms_error"):
        return []
    kernel = new.get("kernel")
    changes = []
    before, after = as_dict(old.get("dkms")), as_dict(new.get("dkms"))
    for module in sorted(before.keys() | after.keys()):
        o, n = _built_for(as_dict(before.get(module)), old.get("kernel")), _built_for(as_dict(after.get(module)), kernel)
        if o and not n and after:
            text = (f"DKMS has no build of {module} for the running kernel {fmt.value(kernel)} (it had {fmt.listing(o)} "
                    f"for {fmt.value(old.get('kernel'))}): the module cannot be loaded until DKMS builds it")
            severity = Severity.high if module.startswith("nvidia") else Severity.medium
            changes.append(Change("driver", f"dkms {module}", o, None, severity, text))
    return changes


def _built_for(versions: Facts, kernel: Any) -> list[str]:
    return sorted(v for v, built in versions.items() if any(str(b).split("/")[0] == kernel for b in built or []))


# ---- RDMA devices --------------------------------------------------------------------------------


def _rdma(old: Facts, new: Facts) -> list[Change]:
    changes = []
    for name in sorted(old.keys() | new.keys()):
        o, n = as_dict(old.get(name)), as_dict(new.get(name))
        if not n:
            text = f"RDMA device {name} is gone: NCCL has one network rail less (or falls back to TCP sockets)"
            changes.append(Change("system", f"rdma {name}", _describe(o), None, Severity.high, text, magnitude=2.0))
            continue
        if not o:
            text = f"RDMA device {name} ({_describe(n)}) appeared"
            changes.append(Change("system", f"rdma {name}", None, _describe(n), Severity.low, text))
            continue
        if o.get("fw_ver") != n.get("fw_ver"):
            text = f"RDMA device {name} firmware {fmt.value(o.get('fw_ver'))} → {fmt.value(n.get('fw_ver'))}"
            changes.append(Change("system", f"rdma {name} firmware", o.get("fw_ver"), n.get("fw_ver"),
                                  Severity.medium, text))
        changes += _ports(name, as_dict(o.get("ports")), as_dict(n.get("ports")))
    return changes


def _ports(device: str, old: Facts, new: Facts) -> list[Change]:
    changes = []
    for port in sorted(old.keys() & new.keys()):
        o, n = as_dict(old[port]), as_dict(new[port])
        was, now = _state(o), _state(n)
        if was != now:
            down = ACTIVE in was and ACTIVE not in now
            text = f"RDMA device {device} port {port} {was} → {now}" + (
                ": NCCL loses this rail (fewer channels, or a hang where a peer still uses it)" if down else "")
            changes.append(Change("system", f"rdma {device} port {port}", was, now,
                                  Severity.high if down else Severity.low, text, magnitude=2.0 if down else 0.5))
        elif o.get("rate") != n.get("rate"):
            text = f"RDMA device {device} port {port} rate {fmt.value(o.get('rate'))} → {fmt.value(n.get('rate'))}"
            changes.append(Change("system", f"rdma {device} port {port} rate", o.get("rate"), n.get("rate"),
                                  Severity.medium, text))
    return changes


def _state(port: Facts) -> str:
    """``4: ACTIVE`` as sysfs writes it, read as ``ACTIVE``."""
    state = str(port.get("state") or "unknown")
    return state.split(":", 1)[-1].strip()


def _describe(device: Facts) -> str:
    layers = sorted({str(as_dict(p).get("link_layer")) for p in as_dict(device.get("ports")).values()
                     if as_dict(p).get("link_layer")})
    return ", ".join(part for part in (device.get("hca_type"), "/".join(layers)) if part) or "RDMA device"


def _unreadable(what: str, old: Any, new: Any) -> Change:
    text = (f"kernel {what} could not be read: {fmt.value(new)}; it is not compared" if new
            else f"kernel {what} can be read again (was: {fmt.value(old)})")
    return Change("driver", f"({what})", old, new, Severity.low if new else Severity.info, text)
