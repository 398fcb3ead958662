"""The NVIDIA driver's layers (the ``driver`` probe) and the kernel command line.

The layers must agree: the userspace libraries with the loaded kernel module (else NVML
and CUDA fail in every new process), the fabric manager with the driver (else it refuses
to start and NVSwitch hosts have no usable GPUs). A change that puts them out of step is
the cause to name first; a change that moves them together is an upgrade.
"""

from __future__ import annotations

from typing import Any

from driftwatch.facts import fmt
from driftwatch.diff.change import Change, Severity
from driftwatch.diff.context import DiffContext
from driftwatch.facts.read import Facts, as_dict

KEYS = frozenset({"kernel_module", "userspace", "fabric_manager", "persistenced", "container_toolkit",
                  "nvswitches", "cmdline"})
# Kernel parameters that decide whether GPUs reach each other (and NICs) peer to peer.
P2P_PARAMS = ("iommu", "intel_iommu", "amd_iommu", "iommu.passthrough", "iommu.strict", "pci", "pcie_acs_override",
              "pcie_aspm", "vfio-pci.ids", "vfio_iommu_type1.allow_unsafe_interrupts")
BOOT_PARAMS = ("BOOT_IMAGE", "initrd", "root")
MISMATCH = ("new processes will get 'Failed to initialize NVML: Driver/library version mismatch' "
            "until a reboot or a reload of the kernel module")


def diff_driver(old: Facts, new: Facts, ctx: DiffContext) -> list[Change]:
    return [
        *_layers(old, new),
        *_fabric_manager(old, new),
        *_persistenced(as_dict(old.get("persistenced")), as_dict(new.get("persistenced"))),
        *_toolkit(as_dict(old.get("container_toolkit")), as_dict(new.get("container_toolkit"))),
        *_nvswitches(old.get("nvswitches"), new.get("nvswitches")),
        *diff_cmdline(as_dict(old.get("cmdline")), as_dict(new.get("cmdline"))),
    ]


def _module(facts: Facts) -> str | None:
    return as_dict(facts.get("kernel_module")).get("version")


def _user(facts: Facts) -> str | None:
    return as_dict(facts.get("userspace")).get("version")


def _layers(old: Facts, new: Facts) -> list[Change]:
    (old_km, old_us), (new_km, new_us) = (_module(old), _user(old)), (_module(new), _user(new))
    pair = f"kernel module {fmt.value(new_km)}, userspace {fmt.value(new_us)}"
    if (old_km, old_us) == (new_km, new_us):
        return _flavor(as_dict(old.get("kernel_module")), as_dict(new.get("kernel_module")))
    if new_km and new_us and new_km != new_us:
        text = f"userspace driver {new_us} while the loaded kernel module is {new_km}: {MISMATCH}"
        return [Change("driver", "driver layers", _pair(old_km, old_us), pair, Severity.critical, text, magnitude=3.0)]
    if new_us and not new_km and old_km:
        text = (f"the NVIDIA kernel module is no longer loaded (was {old_km}) while userspace driver {new_us} is "
                "installed: new processes find no GPU")
        return [Change("driver", "kernel module", old_km, None, Severity.critical, text, magnitude=3.0)]
    if old_km and old_us and old_km != old_us and new_km == new_us:
        text = f"driver layers in step again at {new_km} (were: {_pair(old_km, old_us)})"
        return [Change("driver", "driver layers", _pair(old_km, old_us), pair, Severity.info, text)]
    changes = []
    if old_km != new_km:
        text = f"NVIDIA kernel module {_v(old_km)} → {_v(new_km)}" + (
            f" (userspace {new_us}, in step)" if new_km and new_km == new_us else "")
        changes.append(Change("driver", "kernel module", old_km, new_km, Severity.high, text, magnitude=2.0))
    if old_us != new_us and not (new_km and new_km == new_us and old_km != new_km):
        text = f"userspace driver (libcuda, libnvidia-ml) {_v(old_us)} → {_v(new_us)}"
        changes.append(Change("driver", "userspace driver", old_us, new_us, Severity.high, text, magnitude=2.0))
    return changes


def _flavor(old: Facts, new: Facts) -> list[Change]:
    if not old or not new or old.get("flavor") == new.get("flavor"):
        return []
    text = (f"NVIDIA kernel module {new.get('version')} is now the {fmt.value(new.get('flavor'))} flavour "
            f"(was {fmt.value(old.get('flavor'))}): recent GPUs need the open modules, older ones the proprietary")
    return [Change("driver", "kernel module flavour", old.get("flavor"), new.get("flavor"), Severity.high, text)]


def _fabric_manager(old: Facts, new: Facts) -> list[Change]:
    o, n = as_dict(old.get("fabric_manager")), as_dict(new.get("fabric_manager"))
    switches = bool(new.get("nvswitches"))
    changes: list[Change] = []
    km, version = _module(new), n.get("version")
    out_of_step = bool(km and version and km != version)
    if out_of_step and (o.get("version"), _module(old)) != (version, km):
        consequence = ("on this NVSwitch host CUDA fails with 'system not yet initialized'" if switches
                       else "it refuses to start with a different driver version")
        text = f"fabric manager {version} with driver {km}: {consequence}"
        severity = Severity.critical if switches else Severity.high
        changes.append(Change("driver", "fabric manager", o.get("version"), version, severity, text, magnitude=3.0))
    elif o.get("version") != version and (o or n):
        text = f"fabric manager {_v(o.get('version'))} → {_v(version)}" + (
            f": {fmt.value(n.get('error'))}" if n.get("error") else "")
        changes.append(Change("driver", "fabric manager", o.get("version"), version, Severity.medium, text))
    was, now = _fm_state(o), _fm_state(n)
    if o and n and was != now:
        text = f"nvidia-fabricmanager is now {now} (was {was})" + (
            ": NVSwitch hosts need it to initialize GPUs" if switches and now != "active" else "")
        severity = Severity.high if switches and was == "active" else Severity.medium
        changes.append(Change("driver", "fabric manager service", was, now, severity, text, magnitude=2.0))
    return changes


def _fm_state(fm: Facts) -> str:
    """The service's state when systemd reports one, else whether the process runs."""
    if fm.get("service"):
        return str(fm["service"])
    return "running" if fm.get("running") else "not running"


def _persistenced(old: Facts, new: Facts) -> list[Change]:
    if not old or not new or old.get("running") == new.get("running"):
        return []
    now = "running" if new.get("running") else "not running"
    text = f"nvidia-persistenced is now {now} (was {'running' if old.get('running') else 'not running'})"
    severity = Severity.medium if old.get("running") else Severity.low
    return [Change("driver", "nvidia-persistenced", old.get("running"), new.get("running"), severity, text)]


def _toolkit(old: Facts, new: Facts) -> list[Change]:
    if (old.get("version"), old.get("error")) == (new.get("version"), new.get("error")):
        return []
    if new.get("error") and not old.get("error"):
        text = f"nvidia-ctk --version fails: {fmt.value(new.get('error'))}"
        return [Change("driver", "container toolkit", old.get("version"), None, Severity.low, text)]
    text = (f"NVIDIA container toolkit {_v(old.get('version'))} → {_v(new.get('version'))}: "
            "containers started from now on get their GPUs and driver libraries injected differently")
    return [Change("driver", "container toolkit", old.get("version"), new.get("version"), Severity.medium, text)]


def _nvswitches(old: Any, new: Any) -> list[Change]:
    if old == new or old is None or new is None:
        return []
    text = f"NVSwitches on the PCI bus {old} → {new}: a switch fell off the bus or came back"
    return [Change("driver", "nvswitches", old, new, Severity.high, text, magnitude=2.0)]


def diff_cmdline(old: Facts, new: Facts) -> list[Change]:
    """One change per kernel parameter that changed, IOMMU/ACS ones first and high."""
    before, after = as_dict(old.get("params")), as_dict(new.get("params"))
    if not old or not new or before == after:
        return []
    changes = []
    for name in sorted(before.keys() | after.keys()):
        if name in before and name in after and before[name] == after[name]:
            continue
        was, now = _param(name, before), _param(name, after)
        if name in P2P_PARAMS or name.startswith(("iommu", "intel_iommu", "amd_iommu")):
            text = (f"kernel command line {name}: {was} → {now}: IOMMU and ACS settings decide whether GPUs reach "
                    "each other peer to peer (NCCL hangs or falls back to slower paths when they cannot)")
            severity, magnitude = Severity.high, 2.0
        elif name.startswith("nvidia"):
            text = f"kernel command line {name}: {was} → {now}: an NVIDIA driver option set at boot"
            severity, magnitude = Severity.high, 1.5
        else:
            text = f"kernel command line {name}: {was} → {now}"
            severity, magnitude = (Severity.low if name in BOOT_PARAMS else Severity.medium), 0.5
        changes.append(Change("system", f"cmdline {name}", was, now, severity, text, magnitude=magnitude))
    return changes


def _param(name: str, params: Facts) -> str:
    if name not in params:
        return "(not set)"
    value = params[name]
    return "set" if value is None else f"{name}={fmt.value(value)}"


def _pair(module: str | None, user: str | None) -> str:
    return f"kernel module {fmt.value(module)}, userspace {fmt.value(user)}"


def _v(value: Any) -> str:
    return "absent" if value is None else fmt.value(value)
