"""The perf probe's preflight: may the GPUs be measured? Asked of nvidia-smi, before CUDA.

A benchmark on a GPU that serves or trains takes its memory and its time, and measures
nothing worth keeping. So before anything initialises CUDA, one remote script asks
nvidia-smi for every GPU's memory, utilisation and MIG mode and for the compute
processes (with each one's command line from ``/proc``), and :func:`refusal` says no —
"GPU 3 busy: sglang pid 4411, 71.2 GiB" — when any GPU has a compute process, more than
1 GiB in use, utilisation above 5 %, or MIG enabled. The probe never changes clocks,
power limits or modes: it only reads them here, and samples them during the run.
"""

from __future__ import annotations

import os
import secrets
import shlex
from dataclasses import dataclass, field
from typing import Any

from driftwatch.probes.base import ProbeContext, ProbeError
from driftwatch.probes.gpu import (
    COMPUTE_APPS_FIELDS,
    Block,
    convert,
    parse_blocks,
    parse_compute_apps_csv,
    parse_query_gpu_csv,
    query_gpu_block,
)

MAX_USED_MIB = 1024  # a CUDA context alone holds ~0.5 GiB; more is somebody's data
MAX_UTILISATION_PCT = 5
MAX_CMDLINE = 512  # bytes of /proc/PID/cmdline read per compute process

# (nvidia-smi field, fact key, type); the optional ones (older drivers reject the whole
# query over one unknown field) go when the query is refused, as the gpu probe does.
FIELDS: tuple[tuple[str, str, type], ...] = (
    ("index", "index", int),
    ("uuid", "uuid", str),
    ("pci.bus_id", "bus_id", str),
    ("memory.used", "memory_used_mib", int),
    ("memory.total", "memory_total_mib", int),
    ("utilization.gpu", "utilization_pct", int),
    ("persistence_mode", "persistence_mode", str),
    ("power.limit", "power_limit_w", float),
    ("clocks.max.sm", "sm_clock_max_mhz", int),
    ("clocks.max.memory", "mem_clock_max_mhz", int),
    ("pcie.link.gen.max", "pcie_gen_max", int),
    ("pcie.link.width.max", "pcie_width_max", int),
    ("driver_version", "driver_version", str),
    ("name", "name", str),
)
OPTIONAL = (("mig.mode.current", "mig_mode", str), ("compute_cap", "compute_cap", str))
_NO_DEVICES = "No devices were found"


def query_fields(*, optional: bool = True) -> list[str]:
    """``name`` last: nvidia-smi does not quote its CSV (see probes/gpu.py)."""
    fields = [f for f, _, _ in FIELDS if f != "name"] + ([f for f, _, _ in OPTIONAL] if optional else [])
    return fields + ["name"]


def build_script(marker: str) -> str:
    """One round trip: the GPUs, the compute processes and their command lines."""
    full, core = ",".join(query_fields()), ",".join(query_fields(optional=False))
    apps = ",".join(COMPUTE_APPS_FIELDS)
    fmt = "--format=csv,noheader,nounits"
    return f"""\
command -v nvidia-smi >/dev/null 2>&1 || {{ echo "{marker} missing 127"; exit 0; }}
{query_gpu_block(marker, full, core)}apps=$(nvidia-smi --query-compute-apps={apps} {fmt} 2>&1); rc=$?
printf '%s\\n%s\\n' "{marker} compute-apps $rc" "$apps"
[ $rc -eq 0 ] || exit 0
printf '%s\\n' "$apps" | while IFS=', ' read -r uuid pid rest; do
  case "$pid" in ''|*[!0-9]*) continue ;; esac
  printf '%s\\n' "{marker} cmdline 0 $pid"
  head -c {MAX_CMDLINE} "/proc/$pid/cmdline" 2>/dev/null | tr '\\0' ' '; echo
done
"""


@dataclass
class Preflight:
    """What nvidia-smi said of the GPUs just before the run; ``missing``: no nvidia-smi."""

    gpus: dict[str, dict[str, Any]] = field(default_factory=dict)  # by UUID
    processes: dict[str, dict[str, Any]] = field(default_factory=dict)  # "<uuid>:<pid>"
    cmdlines: dict[int, str] = field(default_factory=dict)
    missing: bool = False
    no_devices: bool = False

    @property
    def driver_version(self) -> str | None:
        return next((str(g["driver_version"]) for g in self.gpus.values() if g.get("driver_version")), None)


def parse_preflight(blocks: dict[str, Block]) -> Preflight:
    """The preflight script's output; a failed query is a ProbeError (nothing is known)."""
    if "missing" in blocks:
        return Preflight(missing=True)
    query = blocks.get("query-gpu")
    if query is None:
        raise ProbeError("nvidia-smi produced no query-gpu output")
    if query.rc != 0:
        if _NO_DEVICES in query.text:
            return Preflight(no_devices=True)
        raise ProbeError(f"nvidia-smi --query-gpu failed: {' / '.join(query.text.split(chr(10))[:3]).strip()}")
    fields = query.args[0].split(",") if query.args else query_fields()
    apps = blocks.get("compute-apps")
    if apps is None or apps.rc != 0:
        # Unknown processes are not "no processes": nothing may be measured.
        raise ProbeError(f"nvidia-smi could not list the compute processes: {(apps.text if apps else '').strip()[:200]}")
    try:
        rows = parse_query_gpu_csv(query.text, fields)
        processes = parse_compute_apps_csv(apps.text)
    except ValueError as exc:
        raise ProbeError(f"unexpected nvidia-smi output: {exc}") from exc
    kinds = {f: (key, kind) for f, key, kind in (*FIELDS, *OPTIONAL)}
    gpus = {  # every key, None where this driver was not asked (an older one refused the field)
        uuid: {key: convert(str(row[f]), kind) if row.get(f) is not None else None for f, (key, kind) in kinds.items()}
        for uuid, row in rows.items()
    }
    cmdlines = {}
    for name, block in blocks.items():
        if name.startswith("cmdline:"):
            cmdlines[int(name.partition(":")[2])] = block.text.strip()
    return Preflight(gpus=gpus, processes=processes, cmdlines=cmdlines)


def split_cmdline_blocks(text: str, marker: str) -> dict[str, Block]:
    """``parse_blocks``, with each ``cmdline`` block kept apart by its pid."""
    renamed = []
    for line in text.splitlines():
        if line.startswith(f"{marker} cmdline 0 "):
            line = f"{marker} cmdline:{line.rsplit(' ', 1)[1]} 0"
        renamed.append(line)
    return parse_blocks("\n".join(renamed), marker)


def process_label(name: Any, cmdline: str | None) -> str:
    """What a person calls a GPU process: ``sglang`` for ``python3 -m sglang.launch_server``,
    the script or program's name otherwise (nvidia-smi's name when /proc hides it)."""
    words = shlex.split(cmdline, posix=True) if cmdline and _quotes_balanced(cmdline) else (cmdline or "").split()
    if words:
        program = os.path.basename(words[0])
        if program.startswith("python"):
            rest = words[1:]
            for i, word in enumerate(rest):
                if word == "-m" and i + 1 < len(rest):
                    return rest[i + 1].split(".")[0]
                if word == "-c":
                    return program
                if not word.startswith("-"):
                    return os.path.basename(word).removesuffix(".py")
        return program
    return os.path.basename(str(name)) if name else "a process"


def _quotes_balanced(text: str) -> bool:
    try:
        shlex.split(text)
    except ValueError:
        return False
    return True


def gpu_name(gpu: dict[str, Any], uuid: str) -> str:
    index = gpu.get("index")
    return f"GPU {index}" if index is not None else f"GPU {uuid}"


def refusal(preflight: Preflight) -> str | None:
    """Why the GPUs must not be measured now, naming the first busy GPU; None: all idle."""
    reasons: list[str] = []
    by_gpu: dict[str, list[dict[str, Any]]] = {}
    for proc in preflight.processes.values():
        by_gpu.setdefault(str(proc.get("gpu_uuid")), []).append(proc)
    for uuid, gpu in sorted(preflight.gpus.items(), key=lambda item: _index(item[1])):
        who = gpu_name(gpu, uuid)
        reason = _busy(gpu, by_gpu.get(uuid, []), preflight.cmdlines)
        if reason is not None:
            reasons.append(f"{who} {reason}")
    for uuid in sorted(set(by_gpu) - set(preflight.gpus)):  # a process on a GPU not listed
        reasons.append(f"GPU {uuid} busy: {_process(by_gpu[uuid][0], preflight.cmdlines)}")
    if not reasons:
        return None
    more = f" (and {len(reasons) - 1} more GPU{'s' if len(reasons) > 2 else ''} busy)" if len(reasons) > 1 else ""
    return reasons[0] + more


def _busy(gpu: dict[str, Any], processes: list[dict[str, Any]], cmdlines: dict[int, str]) -> str | None:
    if str(gpu.get("mig_mode") or "").lower() == "enabled":
        return "has MIG enabled: only whole GPUs are measured"
    if processes:
        biggest = max(processes, key=lambda p: p.get("used_mib") or 0)
        others = f"; {len(processes) - 1} more process{'es' if len(processes) > 2 else ''} on it" if len(processes) > 1 else ""
        return f"busy: {_process(biggest, cmdlines)}{others}"
    used = gpu.get("memory_used_mib")
    if isinstance(used, (int, float)) and used > MAX_USED_MIB:
        return f"busy: {used / 1024:.1f} GiB of memory in use by no listed process (another container?)"
    util = gpu.get("utilization_pct")
    if isinstance(util, (int, float)) and util > MAX_UTILISATION_PCT:
        return f"busy: utilisation {util:g}%"
    return None


def _process(proc: dict[str, Any], cmdlines: dict[int, str]) -> str:
    pid = proc.get("pid")
    label = process_label(proc.get("name"), cmdlines.get(pid) if isinstance(pid, int) else None)
    return f"{label} pid {pid}{_memory(proc.get('used_mib'))}"


def _memory(mib: Any) -> str:
    if not isinstance(mib, (int, float)):
        return ""
    return f", {mib / 1024:.1f} GiB" if mib >= 1024 else f", {mib:g} MiB"


def _index(gpu: dict[str, Any]) -> int:
    index = gpu.get("index")
    return index if isinstance(index, int) else 1 << 30


def run_preflight(ctx: ProbeContext) -> Preflight:
    marker = "@@driftwatch-perf-" + secrets.token_hex(8)
    result = ctx.run(build_script(marker))
    return parse_preflight(split_cmdline_blocks(result.text, marker))
