"""NVIDIA's failure messages read as the state that causes them, on the lines public
reports quote (each with its source)."""

from __future__ import annotations

import pytest

from driftwatch.nvidia_errors import read_error

# zzzhouuu/truenas-nvidia-drivers#19, kept whole by the gpu probe (one line per " / ").
MISMATCH = ("nvidia-smi --query-gpu failed: Failed to initialize NVML: Driver/library version mismatch / "
            "NVML library version: 580.178")
# GoogleCloudPlatform/compute-gpu-installation#18: after a kernel upgrade.
NO_DRIVER = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the "
             "latest NVIDIA driver is installed and running.")
# NVIDIA/nvidia-docker#365: modprobe's own line first.
NO_MODULE = "modprobe: FATAL: Module nvidia not found.\n" + NO_DRIVER
# NVIDIA/nvidia-container-toolkit#48: inside a container after systemctl daemon-reload.
UNKNOWN = "Failed to initialize NVML: Unknown Error"


@pytest.mark.parametrize(("text", "kind", "library"), [
    (MISMATCH, "version-mismatch", "580.178"),
    ("Failed to initialize NVML: Driver/library version mismatch", "version-mismatch", None),
    (NO_DRIVER, "no-driver", None),
    (NO_MODULE, "no-driver", None),
    (UNKNOWN, "lost-devices", None),
])
def test_each_message_names_its_layer(text: str, kind: str, library: str | None) -> None:
    said = read_error(text)
    assert said is not None and (said.kind, said.library_version) == (kind, library)


def test_other_failures_are_not_read_as_driver_states() -> None:
    for text in (None, "", "nvidia-smi not found", "timed out after 10s", "No devices were found"):
        assert read_error(text) is None


def test_the_hint_says_the_mechanism() -> None:
    assert read_error(MISMATCH).hint().startswith(  # type: ignore[union-attr]
        "NVML's userspace library (580.178) does not match the loaded kernel module: the driver was upgraded")
    assert "not built for the running kernel" in read_error(NO_DRIVER).hint()  # type: ignore[union-attr]
