"""The driver's layers (the ``driver`` probe): the loaded kernel module against the userspace
driver, and the fabric manager an NVSwitch host cannot use its GPUs without."""

from __future__ import annotations

from driftwatch.facts.read import as_dict
from driftwatch.rules.finding import Finding
from driftwatch.rules.host import Host, Missing
from driftwatch.severity import Severity

MISMATCH = "https://github.com/NVIDIA/ubuntu-packaging-nvidia-driver/issues/3"
FABRIC_MANAGER = "https://github.com/pytorch/pytorch/issues/35710"
LAYERS = (("driver", "driver layers"), ("driver", "kernel module"), ("driver", "userspace driver"), ("driver", "driver"))


def kernel_module_vs_userspace(host: Host) -> list[Finding]:
    driver = host.facts("driver")
    module = as_dict(driver.get("kernel_module")).get("version")
    user = as_dict(driver.get("userspace")).get("version")
    if not module or not user:
        raise Missing("the kernel module's or the userspace driver's version was not read")
    if module == user:
        return []
    return [Finding(
        severity=Severity.critical,
        why=f"the userspace driver is {user} but the loaded kernel module is {module}: every new process gets "
            "'Failed to initialize NVML: Driver/library version mismatch' and CUDA does not start",
        fix="reboot, or stop every GPU process and reload the nvidia kernel modules "
            "(modprobe -r nvidia_uvm nvidia_drm nvidia_modeset nvidia; modprobe nvidia)",
        reference=MISMATCH,
        subjects=LAYERS,
        key="layers",
        observed=True,
        restates=(("driver", "driver layers"),),
    )]


def fabric_manager(host: Host) -> list[Finding]:
    driver = host.facts("driver")
    switches = driver.get("nvswitches")
    if not isinstance(switches, int):
        raise Missing("whether the GPUs sit behind NVSwitches is not known")
    if switches == 0:
        return []
    module = as_dict(driver.get("kernel_module")).get("version")
    fm = driver.get("fabric_manager")
    fm = fm if isinstance(fm, dict) else None
    subjects = (("driver", "fabric manager"), ("driver", "fabric manager service"), ("driver", "nvswitches"),
                ("driver", "kernel module"))
    effect = "CUDA fails to initialise on every GPU ('system not yet initialized', error 802)"
    if fm is None:
        problem, fix = "no fabric manager is installed", f"install nvidia-fabricmanager {module or ''} and start it".replace("  ", " ")
    elif fm.get("version") and module and fm.get("version") != module:
        problem = f"the fabric manager is {fm.get('version')} but the driver's kernel module is {module}"
        fix = f"install nvidia-fabricmanager {module} (it must match the driver exactly) and restart it"
    elif fm.get("running") is False and fm.get("service") != "active":
        problem = f"the fabric manager is not running (service {fm.get('service') or 'unknown'})"
        fix = "systemctl enable --now nvidia-fabricmanager, and read its journal if it fails to start"
    else:
        return []
    return [Finding(
        severity=Severity.critical,
        why=f"this host has {switches} NVSwitch{'es' if switches != 1 else ''} and {problem}: {effect}",
        fix=fix,
        reference=FABRIC_MANAGER,
        subjects=subjects,
        key="fabric-manager",
        observed=True,
        restates=(("driver", "fabric manager"), ("driver", "fabric manager service")),
    )]
