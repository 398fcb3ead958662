"""The driver's layers: kernel module vs userspace, the fabric manager on NVSwitch hosts."""

from __future__ import annotations

from driftwatch.severity import Severity
from tests.rules.builders import found, make_snapshot, not_run
from tests.rules.stack import driver

FM = {"version": "590.48.01", "error": None, "service": "active", "service_error": None, "running": True}


def test_a_userspace_driver_ahead_of_the_loaded_module() -> None:
    [finding] = found("kernel-module-vs-userspace", make_snapshot(driver=driver("570.86.15", "570.133.20")))
    assert finding.severity is Severity.critical and finding.observed
    assert "Driver/library version mismatch" in finding.why and finding.fix.startswith("reboot")
    assert found("kernel-module-vs-userspace", make_snapshot(driver=driver())) == []
    no_module = driver()
    no_module["kernel_module"] = None
    assert "was not read" in not_run("kernel-module-vs-userspace", make_snapshot(driver=no_module))


def test_an_nvswitch_host_needs_its_fabric_manager() -> None:
    [missing] = found("fabric-manager", make_snapshot(driver=driver(switches=4)))
    assert missing.severity is Severity.critical and "no fabric manager is installed" in missing.why
    assert "error 802" in missing.why and missing.fix == "install nvidia-fabricmanager 590.48.01 and start it"
    stopped = {**FM, "service": "failed", "running": False}
    [down] = found("fabric-manager", make_snapshot(driver=driver(switches=4, fabric=stopped)))
    assert "not running (service failed)" in down.why
    old = {**FM, "version": "570.86.15"}
    [behind] = found("fabric-manager", make_snapshot(driver=driver(switches=4, fabric=old)))
    assert "must match the driver exactly" in behind.fix
    assert found("fabric-manager", make_snapshot(driver=driver(switches=4, fabric=FM))) == []
    assert found("fabric-manager", make_snapshot(driver=driver(switches=0))) == []  # PCIe GPUs need none
