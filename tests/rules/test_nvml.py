"""nvidia-smi's own failure, joined with the driver's layers the other probes read."""

from __future__ import annotations

from driftwatch.model import ProbeStatus
from driftwatch.severity import Severity
from tests.diff.builders import baseline, failed
from tests.rules.builders import found, make_snapshot
from tests.test_nvidia_errors import MISMATCH, NO_DRIVER, UNKNOWN


def host(gpu_error: str | None, module: str | None = "580.173.02", user: str | None = None) -> dict[str, object]:
    facts: dict[str, object] = dict(baseline())
    if gpu_error is not None:
        facts["gpu"] = failed(ProbeStatus.error, gpu_error)
    facts["driver"] = {"kernel_module": {"version": module, "flavor": "proprietary", "arch": "x86_64",
                                         "source": "/proc/driver/nvidia/version"} if module else None,
                       "userspace": {"version": user, "libraries": {}}}
    return facts


def test_a_mismatch_with_the_library_version_nvml_states() -> None:
    [finding] = found("nvidia-smi-says", make_snapshot(**host(MISMATCH)))
    assert finding.severity is Severity.critical and finding.observed
    assert finding.why == ("nvidia-smi says 'Failed to initialize NVML: Driver/library version mismatch': the "
                           "userspace driver (NVML library 580.178) was upgraded under the loaded kernel module "
                           "580.173.02; every new CUDA process fails until the two match")
    assert finding.fix.startswith("reboot; or, when no process holds the GPUs")
    assert ("probe", "gpu") in finding.subjects


def test_a_mismatch_the_driver_layers_rule_already_says_is_said_once() -> None:
    assert found("nvidia-smi-says", make_snapshot(**host(MISMATCH, user="580.178.04"))) == []


def test_no_driver_after_a_kernel_update() -> None:
    [finding] = found("nvidia-smi-says", make_snapshot(**host(NO_DRIVER, module=None)))
    assert finding.why.startswith("nvidia-smi says it couldn't communicate with the NVIDIA driver: no nvidia kernel "
                                  "module is loaded for the running kernel 5.15.0-171-generic: after a kernel update, "
                                  "DKMS did not build the driver for it")
    assert ("system", "kernel") in finding.subjects and finding.fix.startswith("dkms status")


def test_lost_devices_in_a_container_and_healthy_or_other_failures() -> None:
    [finding] = found("nvidia-smi-says", make_snapshot(**host(UNKNOWN)))
    assert "restart the container" in finding.fix
    assert found("nvidia-smi-says", make_snapshot(**host(None))) == []
    assert found("nvidia-smi-says", make_snapshot(**host("nvidia-smi not found"))) == []
