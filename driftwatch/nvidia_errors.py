"""What NVIDIA's tools say when they cannot reach the GPUs, read as the state that causes it.

nvidia-smi (and every CUDA process) names the broken layer in its own words; a failed gpu
probe keeps them (``nvidia-smi --query-gpu failed: …``). Pure: text in, the state out, for
the diff's probe line and the rules alike.

* ``Failed to initialize NVML: Driver/library version mismatch`` (often followed by
  ``NVML library version: 580.178``): the userspace driver was upgraded under a kernel
  module that is still loaded (NVIDIA/ubuntu-packaging-nvidia-driver#3).
* ``NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver``: no
  nvidia kernel module answers: not loaded, or not built for the running kernel (a kernel
  update without a DKMS build of the driver for it).
* ``Failed to initialize NVML: Unknown Error`` inside a container: the container lost its
  device access (NVIDIA/nvidia-container-toolkit#48: ``systemctl daemon-reload`` with
  cgroup v2 drops the device rules runc set).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_MISMATCH = re.compile(r"Failed to initialize NVML: Driver/library version mismatch")
_LIBRARY = re.compile(r"NVML library version: (\d+(?:\.\d+)+)")
_NO_DRIVER = re.compile(r"couldn't communicate with the NVIDIA driver")
_UNKNOWN = re.compile(r"Failed to initialize NVML: Unknown Error")

MISMATCH_REF = "https://github.com/NVIDIA/ubuntu-packaging-nvidia-driver/issues/3"
NO_DRIVER_REF = "https://github.com/GoogleCloudPlatform/compute-gpu-installation/pull/18"
UNKNOWN_REF = "https://github.com/NVIDIA/nvidia-container-toolkit/issues/48"


@dataclass(frozen=True)
class NvidiaError:
    kind: str  # "version-mismatch", "no-driver", "lost-devices"
    library_version: str | None = None  # what NVML says its own version is (mismatch only)

    def hint(self) -> str:
        """What the words mean, from the words alone (the rules add the module's version)."""
        if self.kind == "version-mismatch":
            library = f" ({self.library_version})" if self.library_version else ""
            return (f"NVML's userspace library{library} does not match the loaded kernel module: the driver was "
                    "upgraded under it, and no new CUDA process starts until a reboot or a reload of the nvidia "
                    "modules")
        if self.kind == "no-driver":
            return ("no nvidia kernel module answers: it is not loaded, or not built for the running kernel "
                    "(a kernel update without a DKMS build of the driver?)")
        return ("NVML cannot open the GPUs' device files: inside a container, its device access was dropped "
                "(systemctl daemon-reload under cgroup v2); restart the container")


def read_error(text: str | None) -> NvidiaError | None:
    """The state an NVIDIA tool's failure message names, or None for any other message."""
    if not text:
        return None
    if _MISMATCH.search(text):
        library = _LIBRARY.search(text)
        return NvidiaError("version-mismatch", library.group(1) if library else None)
    if _NO_DRIVER.search(text):
        return NvidiaError("no-driver")
    if _UNKNOWN.search(text):
        return NvidiaError("lost-devices")
    return None
