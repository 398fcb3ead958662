"""Diff rules of the driver probe: layers out of step, fabric manager, kernel command line."""

from __future__ import annotations

import copy
from typing import Any

from driftwatch.diff import Severity

from driftwatch.explain import DiffResult, diff_snapshots
from driftwatch.probes.driver import parse_cmdline
from tests.diff.builders import make_snapshot

CMDLINE = "BOOT_IMAGE=/vmlinuz-5.15.0-171-generic root=UUID=4f1e ro intel_iommu=on iommu=pt quiet"


def driver(version: str = "570.86.15", userspace: str | None = None, **changes: Any) -> dict[str, Any]:
    user = userspace or version
    facts = {
        "kernel_module": {"version": version, "flavor": "open", "arch": "x86_64", "source": "/proc/driver/nvidia/version"},
        "userspace": {"version": user, "libraries": {f"/usr/lib/x86_64-linux-gnu/libcuda.so.{user}": user}},
        "fabric_manager": {"version": version, "error": None, "service": "active", "service_error": None,
                           "running": True},
        "persistenced": {"installed": True, "running": True},
        "container_toolkit": {"version": "1.17.8", "commit": "f202b80", "error": None},
        "nvswitches": 4,
        "cmdline": parse_cmdline(CMDLINE),
    }
    return {**facts, **changes}


def diff(old: dict[str, Any], new: dict[str, Any]) -> DiffResult:
    return diff_snapshots(make_snapshot(driver=old), make_snapshot(minutes=60, driver=new))


def test_userspace_upgraded_under_the_loaded_module_is_critical_and_first() -> None:
    new = driver(userspace="570.133.20")
    new["fabric_manager"]["version"] = "570.133.20"  # the upgrade took the fabric manager along
    changes = diff(driver(), new).changes
    assert changes[0].explanation.startswith(
        "userspace driver 570.133.20 while the loaded kernel module is 570.86.15: new processes will get "
        "'Failed to initialize NVML: Driver/library version mismatch' until a reboot or a reload of the kernel module"
        " — known-bad state (observed). Fix: reboot")
    assert (changes[0].category, changes[0].severity) == ("driver", Severity.critical)
    fm = next(c for c in changes if c.item == "fabric manager")
    assert fm.explanation.startswith("fabric manager 570.133.20 with driver 570.86.15: on this NVSwitch host CUDA "
                                     "fails with 'system not yet initialized' — known-bad state (observed)")


def test_a_driver_upgrade_in_step_is_one_high_line() -> None:
    [change] = [c for c in diff(driver(), driver("570.133.20")).changes if c.item != "fabric manager"]
    assert change.explanation == "NVIDIA kernel module 570.86.15 → 570.133.20 (userspace 570.133.20, in step)"
    assert change.severity is Severity.high


def test_back_in_step_after_a_reboot_is_context() -> None:
    [change] = [c for c in diff(driver(userspace="570.133.20"), driver("570.133.20")).changes
                if c.item == "driver layers"]
    assert change.severity is Severity.info and "in step again at 570.133.20" in change.explanation


def test_kernel_module_gone_under_installed_userspace() -> None:
    new = driver(kernel_module=None)
    [change] = [c for c in diff(driver(), new).changes if c.item == "kernel module"]
    assert change.severity is Severity.critical
    assert change.explanation == ("the NVIDIA kernel module is no longer loaded (was 570.86.15) while userspace "
                                  "driver 570.86.15 is installed: new processes find no GPU")


def test_fabric_manager_stopped_on_an_nvswitch_host() -> None:
    new = driver()
    new["fabric_manager"].update(service="failed", running=False)
    [change] = diff(driver(), new).changes
    # doctor's fabric-manager rule raises it: CUDA fails with error 802 without it.
    assert (change.item, change.severity) == ("fabric manager service", Severity.critical)
    assert change.explanation.startswith("nvidia-fabricmanager is now failed (was active): NVSwitch hosts need it to "
                                         "initialize GPUs — known-bad state")


def test_kernel_command_line_iommu_change_names_p2p() -> None:
    new = driver(cmdline=parse_cmdline(CMDLINE.replace(" iommu=pt", "").replace("intel_iommu=on", "intel_iommu=off")))
    changes = diff(driver(), new).changes
    assert [c.item for c in changes] == ["cmdline intel_iommu", "cmdline iommu"]
    assert changes[0].explanation.startswith("kernel command line intel_iommu: intel_iommu=on → intel_iommu=off: "
                                             "IOMMU and ACS settings decide whether GPUs reach each other peer to peer")
    assert changes[1].old == "iommu=pt" and changes[1].new == "(not set)"
    assert {c.severity for c in changes} == {Severity.high}


def test_boot_image_alone_is_low() -> None:
    new = driver(cmdline=parse_cmdline(CMDLINE.replace("171", "172")))
    [change] = diff(driver(), new).changes
    assert change.severity is Severity.low and change.item == "cmdline BOOT_IMAGE"


def test_quiet_host_and_identical_facts() -> None:
    assert diff(driver(), driver()).changes == []
    new = copy.deepcopy(driver())
    new["container_toolkit"] = {"version": None, "commit": None, "error": "timed out"}
    [change] = diff(driver(), new).changes
    assert change.severity is Severity.low and change.explanation == "nvidia-ctk --version fails: timed out"
