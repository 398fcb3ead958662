"""What nvidia-smi's own failure says, joined with the layers the driver probe read.

A gpu probe that failed keeps nvidia-smi's words (driftwatch.nvidia_errors reads them):
"Driver/library version mismatch" names the userspace driver upgraded under a loaded
module, with NVML's own version; "couldn't communicate with the NVIDIA driver" names a
module that does not answer, after a kernel update most often because no module was built
for the new kernel. The module's version comes from /proc/driver/nvidia/version (the driver
probe), else /sys/module/nvidia/version as the system probe read it.
"""

from __future__ import annotations

from driftwatch.facts.read import Facts, as_dict
from driftwatch.model import ProbeStatus
from driftwatch.nvidia_errors import MISMATCH_REF, NO_DRIVER_REF, UNKNOWN_REF, NvidiaError, read_error
from driftwatch.rules.finding import Finding
from driftwatch.rules.host import Host, Missing
from driftwatch.severity import Severity

RELOAD = "modprobe -r nvidia_uvm nvidia_drm nvidia_modeset nvidia && modprobe nvidia"


def nvidia_smi_says(host: Host) -> list[Finding]:
    record = host.snapshot.probes.get("gpu")
    if record is None:
        raise Missing("no gpu probe in this snapshot")
    if record.status is not ProbeStatus.error:
        return []  # nvidia-smi answered (or was not asked): it said nothing of the kind
    said = read_error(record.error)
    if said is None:
        return []
    module = _module(host)
    if said.kind == "version-mismatch":
        return _mismatch(host, said, module)
    if said.kind == "no-driver":
        return [_no_driver(host, module)]
    return [Finding(
        severity=Severity.critical,
        why="nvidia-smi says 'Failed to initialize NVML: Unknown Error': " + said.hint(),
        fix="restart the container (or the pod); to stop it recurring, run the NVIDIA container toolkit's "
            "nvidia-ctk system create-dev-char-symlinks, or set systemd's cgroup driver as its documentation says",
        reference=UNKNOWN_REF, subjects=(("probe", "gpu"),), key="nvml-unknown", observed=True,
    )]


def _mismatch(host: Host, said: NvidiaError, module: str | None) -> list[Finding]:
    user = as_dict(_facts(host, "driver").get("userspace")).get("version")
    if module and user and module != user:
        return []  # kernel-module-vs-userspace says it, with both versions the driver probe read
    library = said.library_version or user
    versions = (f"the userspace driver (NVML library {library or 'version unknown'}) was upgraded under the loaded "
                f"kernel module {module or '(version not read)'}")
    return [Finding(
        severity=Severity.critical,
        why=f"nvidia-smi says 'Failed to initialize NVML: Driver/library version mismatch': {versions}; "
            "every new CUDA process fails until the two match",
        fix=f"reboot; or, when no process holds the GPUs (lsof /dev/nvidia*), reload the modules: {RELOAD}",
        reference=MISMATCH_REF,
        subjects=(("probe", "gpu"), ("driver", "userspace driver"), ("driver", "kernel module"), ("driver", "driver")),
        key="nvml-mismatch",
        observed=True,
    )]


def _no_driver(host: Host, module: str | None) -> Finding:
    kernel = _facts(host, "system").get("kernel")
    if module:
        state = f"the nvidia module {module} is loaded but does not answer (a GPU fallen off the bus? see dmesg)"
        fix = "read dmesg for NVRM and Xid lines; drain the host and reboot it"
    else:
        state = (f"no nvidia kernel module is loaded for the running kernel {kernel or '(not read)'}: after a kernel "
                 "update, DKMS did not build the driver for it (or the module failed to load)")
        fix = ("dkms status; build and load the module for this kernel (dkms autoinstall, or reinstall the driver "
               "package), or boot the previous kernel")
    return Finding(
        severity=Severity.critical,
        why=f"nvidia-smi says it couldn't communicate with the NVIDIA driver: {state}; no CUDA process can start",
        fix=fix,
        reference=NO_DRIVER_REF,
        subjects=(("probe", "gpu"), ("system", "kernel"), ("driver", "kernel module"), ("driver", "driver")),
        key="nvml-no-driver",
        observed=True,
    )


def _module(host: Host) -> str | None:
    """The loaded module's version: the driver probe's reading of /proc/driver/nvidia/version
    (null there: not loaded), else, where it did not run, /proc/modules as the system probe read it."""
    if host.has("driver"):
        module = as_dict(host.facts("driver").get("kernel_module")).get("version")
        return str(module) if module else None
    loaded = as_dict(_facts(host, "system").get("nvidia_modules")).get("nvidia")
    return str(loaded) if loaded else None


def _facts(host: Host, probe: str) -> Facts:
    return host.facts(probe) if host.has(probe) else {}
