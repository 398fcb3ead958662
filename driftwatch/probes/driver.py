"""The ``driver`` probe: the NVIDIA driver's layers, each read on its own, none through nvidia-smi.

When the layers fall out of step nvidia-smi is the first thing to fail ("Failed to
initialize NVML: Driver/library version mismatch" after an unattended upgrade replaced the
userspace libraries under a loaded kernel module; "system not yet initialized" when the
fabric manager's version differs from the driver's), so this probe reads each layer
directly and records it even then:

* the kernel module: ``/proc/driver/nvidia/version`` (else ``/sys/module/nvidia/version``),
  with its flavour (open or proprietary);
* the userspace driver: the version in the file names of ``libcuda.so.*`` and
  ``libnvidia-ml.so.*`` as the loader finds them (LD_LIBRARY_PATH, the ldconfig cache,
  the standard directories);
* the fabric manager (``nv-fabricmanager --version``, its systemd service, whether it
  runs), nvidia-persistenced, the container toolkit (``nvidia-ctk --version``), the
  number of NVSwitches on the PCI bus, and ``/proc/cmdline`` (IOMMU and ACS settings
  decide whether GPUs reach each other peer to peer).

Absent is recorded only where the script looked and found nothing; a tool that is there
but fails is recorded with its error.
"""

from __future__ import annotations

import re
from typing import Any

from driftwatch.probes.base import Facts, ProbeContext, ProbeError
from driftwatch.probes.sections import split_sections

DRIVER_DIRS = (
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/usr/local/nvidia/lib64",  # GKE and the GPU operator's driver container
    "/usr/local/nvidia/lib",
    "/usr/lib/wsl/lib",
)
FM_UNITS = (
    "/etc/systemd/system/nvidia-fabricmanager.service",
    "/lib/systemd/system/nvidia-fabricmanager.service",
    "/usr/lib/systemd/system/nvidia-fabricmanager.service",
)
# /proc/PID/comm keeps 15 characters of a command name.
COMM = {"nvidia-persistenced": "nvidia-persiste", "nv-fabricmanager": "nv-fabricmanage"}

# POSIX sh. Each external command gets its own deadline (``t``), shorter than the probe's,
# so a hung nv-fabricmanager costs its own fact, not the kernel module's.
SCRIPT = """\
t() {{ if command -v timeout >/dev/null 2>&1; then timeout -k 1 {seconds} "$@"; else "$@"; fi; }}
echo '@@proc_version'
[ -r /proc/driver/nvidia/version ] && cat /proc/driver/nvidia/version
echo '@@sys_version'
[ -r /sys/module/nvidia/version ] && cat /sys/module/nvidia/version
echo '@@userspace'
tab=$(printf '\\t')
{{
  printf '%s\\n' "${{LD_LIBRARY_PATH:-}}" | tr ':' '\\n' | while IFS= read -r d; do
    [ -n "$d" ] || continue
    for f in "$d"/libcuda.so* "$d"/libnvidia-ml.so*; do [ -e "$f" ] && printf 'ld_library_path\\t%s\\n' "$f"; done
  done
  {{ ldconfig -p || /sbin/ldconfig -p || /usr/sbin/ldconfig -p; }} 2>/dev/null |
    sed -n -e 's/^[[:space:]]*libcuda\\.so.*=> *//p' -e 's/^[[:space:]]*libnvidia-ml\\.so.*=> *//p' |
    while IFS= read -r f; do printf 'ldconfig\\t%s\\n' "$f"; done
  for d in {dirs}; do
    for f in "$d"/libcuda.so* "$d"/libnvidia-ml.so*; do [ -e "$f" ] && printf 'dir\\t%s\\n' "$f"; done
  done
}} | while IFS= read -r line; do printf '%s\\t%s\\n' "$line" "$(readlink -f "${{line#*$tab}}" 2>/dev/null)"; done
fm=$(command -v nv-fabricmanager 2>/dev/null)
if [ -n "$fm" ]; then
  out=$(t "$fm" --version 2>&1); rc=$?
  echo '@@fm_version'; printf '%s\\n' "$out"; echo '@@fm_rc'; echo "$rc"
fi
unit=
for u in {units}; do [ -e "$u" ] && unit=$u; done
if [ -n "$unit$fm" ]; then
  echo '@@fm_installed'
  if command -v systemctl >/dev/null 2>&1; then
    out=$(t systemctl is-active nvidia-fabricmanager 2>&1)
    echo '@@fm_service'; printf '%s\\n' "$out"
  fi
fi
echo '@@persistenced_path'
command -v nvidia-persistenced 2>/dev/null
echo '@@running'
cat /proc/[0-9]*/comm 2>/dev/null | grep -x -e {persistenced} -e {fabricmanager}
ctk=$(command -v nvidia-ctk 2>/dev/null)
if [ -n "$ctk" ]; then
  out=$(t "$ctk" --version 2>&1); rc=$?
  echo '@@ctk_version'; printf '%s\\n' "$out"; echo '@@ctk_rc'; echo "$rc"
fi
echo '@@nvswitches'
nv=$(grep -l 0x10de /sys/bus/pci/devices/*/vendor 2>/dev/null | sed 's,/vendor$,/class,')
if [ -n "$nv" ]; then grep -l '^0x0680' $nv 2>/dev/null | wc -l; else echo 0; fi
echo '@@cmdline'
cat /proc/cmdline
echo '@@end'
"""

_KERNEL_MODULE = re.compile(
    r"NVRM version: NVIDIA UNIX (?:(?P<open>Open )?Kernel Module for (?P<arch>\S+)|(?P<arch2>\S+) Kernel Module)"
    r"\s+(?P<version>\d+(?:\.\d+)+)"
)
_FABRIC_MANAGER = re.compile(r"Fabric Manager version is\s*:?\s*(\d+(?:\.\d+)+)")
_CTK = re.compile(r"NVIDIA Container Toolkit CLI version\s+(\S+)")
_CTK_COMMIT = re.compile(r"^commit:\s*(\S+)", re.MULTILINE)
_CMDLINE_WORD = re.compile(r'(?:[^\s"]+|"[^"]*"?)+')
_LIB_VERSION = re.compile(r"^lib(?:cuda|nvidia-ml)\.so\.(\d+\.\d+(?:\.\d+)?)$")
SERVICE_STATES = frozenset({"active", "inactive", "failed", "activating", "deactivating", "reloading", "maintenance"})


def parse_proc_version(text: str) -> dict[str, str | None] | None:
    """``/proc/driver/nvidia/version``: the module's version and flavour; None if unreadable.

    Proprietary: ``NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.173.02  Tue Jun …``;
    open: ``NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  565.57.01  Release Build …``.
    """
    match = _KERNEL_MODULE.search(text)
    if not match:
        return None
    return {
        "version": match.group("version"),
        "flavor": "open" if match.group("open") else "proprietary",
        "arch": match.group("arch") or match.group("arch2"),
    }


def parse_fabricmanager_version(text: str) -> str | None:
    """``Fabric Manager version is : 535.104.05`` → ``535.104.05``."""
    match = _FABRIC_MANAGER.search(text)
    return match.group(1) if match else None


def parse_ctk_version(text: str) -> dict[str, str | None]:
    """``NVIDIA Container Toolkit CLI version 1.12.0`` and its ``commit:`` line."""
    version, commit = _CTK.search(text), _CTK_COMMIT.search(text)
    return {"version": version.group(1) if version else None, "commit": commit.group(1) if commit else None}


def parse_cmdline(text: str) -> dict[str, Any]:
    """``/proc/cmdline`` as written and as parameters: {name: value, or None for a flag}.

    Split as the kernel does: on blanks, except inside double quotes (which are dropped);
    backslashes are ordinary (``initrd=\\EFI\\…``). What follows ``--`` belongs to init. A
    repeated name keeps its last value, as most kernel parameters do."""
    raw = text.strip()
    params: dict[str, str | None] = {}
    for word in _CMDLINE_WORD.findall(raw):
        if word == "--":
            break
        name, eq, value = word.replace('"', "").partition("=")
        params[name] = value if eq else None
    return {"text": raw, "params": params}


def parse_userspace(text: str) -> dict[str, Any]:
    """Lines ``source<TAB>path<TAB>real path`` in loader order (LD_LIBRARY_PATH, ldconfig,
    standard directories): each driver library file's version, and the version of the
    ``libcuda`` (else ``libnvidia-ml``) a process would load first."""
    libraries: dict[str, str | None] = {}
    first: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) < 2 or not parts[1].strip():
            continue
        real = parts[2].strip() if len(parts) > 2 and parts[2].strip() else parts[1].strip()
        match = _LIB_VERSION.match(real.rsplit("/", 1)[-1])
        version = match.group(1) if match else None
        libraries.setdefault(real, version)
        kind = "cuda" if "/libcuda.so" in "/" + real.rsplit("/", 1)[-1] else "nvml"
        if version and kind not in first:
            first[kind] = version
    return {"version": first.get("cuda") or first.get("nvml"), "libraries": dict(sorted(libraries.items()))}


def _command(sections: dict[str, str], name: str) -> tuple[str | None, str | None]:
    """(output, error) of a command the script ran under ``@@name_version``/``@@name_rc``."""
    out = sections.get(f"{name}_version", "").strip()
    rc = sections.get(f"{name}_rc", "").strip()
    if rc == "0":
        return out, None
    why = "timed out" if rc in ("124", "137") else f"exit {rc}"
    return None, f"{why}: {out.splitlines()[-1]}" if out else why


def parse_driver(text: str) -> Facts:
    sections = split_sections(text)
    if "end" not in sections:
        raise ProbeError("driver script output is incomplete")
    running = set(sections.get("running", "").split())
    return {
        "kernel_module": _kernel_module(sections),
        "userspace": parse_userspace(sections.get("userspace", "")),
        "fabric_manager": _fabric_manager(sections, running),
        "persistenced": {
            "installed": bool(sections.get("persistenced_path", "").strip()),
            "running": COMM["nvidia-persistenced"] in running,
        },
        "container_toolkit": _container_toolkit(sections),
        "nvswitches": int(sections.get("nvswitches", "0").strip() or 0),
        "cmdline": parse_cmdline(sections.get("cmdline", "")),
    }


def _kernel_module(sections: dict[str, str]) -> dict[str, Any] | None:
    proc = sections.get("proc_version", "").strip()
    if proc:
        parsed = parse_proc_version(proc)
        if parsed is not None:
            return {**parsed, "source": "/proc/driver/nvidia/version"}
        return {"version": None, "flavor": None, "arch": None, "source": "/proc/driver/nvidia/version",
                "error": f"unrecognised: {proc.splitlines()[0][:120]}"}
    version = sections.get("sys_version", "").strip()
    if version:
        return {"version": version, "flavor": None, "arch": None, "source": "/sys/module/nvidia/version"}
    return None  # neither file: no nvidia module is loaded


def _fabric_manager(sections: dict[str, str], running: set[str]) -> dict[str, Any] | None:
    if "fm_installed" not in sections:
        return None
    version, error = (None, None)
    if "fm_version" in sections:
        out, error = _command(sections, "fm")
        version = parse_fabricmanager_version(out) if out is not None else None
        if out is not None and version is None:
            error = f"unrecognised: {out.splitlines()[0][:120] if out else '(no output)'}"
    service_out = sections.get("fm_service")
    state = service_out.strip().splitlines()[-1].strip() if service_out and service_out.strip() else None
    service, service_error = (state, None) if state in SERVICE_STATES else (None, state)
    return {"version": version, "error": error, "service": service, "service_error": service_error,
            "running": COMM["nv-fabricmanager"] in running}


def _container_toolkit(sections: dict[str, str]) -> dict[str, Any] | None:
    if "ctk_version" not in sections:
        return None
    out, error = _command(sections, "ctk")
    parsed = parse_ctk_version(out) if out is not None else {"version": None, "commit": None}
    if out is not None and parsed["version"] is None:
        error = f"unrecognised: {out.splitlines()[0][:120] if out else '(no output)'}"
    return {**parsed, "error": error}


def driver_script(timeout: float) -> str:
    seconds = max(1, int(timeout * 0.5))
    return SCRIPT.format(
        seconds=seconds,
        dirs=" ".join(DRIVER_DIRS),
        units=" ".join(FM_UNITS),
        persistenced=COMM["nvidia-persistenced"],
        fabricmanager=COMM["nv-fabricmanager"],
    )


class DriverProbe:
    name = "driver"

    def collect(self, ctx: ProbeContext) -> Facts:
        result = ctx.run(driver_script(ctx.timeout))
        return parse_driver(result.text)
