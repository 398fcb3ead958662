"""GPU facts from ``nvidia-smi``: driver, CUDA, per-GPU state, power and clocks, GPU
processes, topology.

All nvidia-smi calls run in one remote script (one round trip, one deadline); each call's
output comes back as a block behind a marker line that carries its exit status.

Power limits, application clocks and clock event reasons come from a call of their own
(``CLOCK_FIELDS``), so a driver that lacks one of them costs those facts, never the GPU
query: what it cannot report is ``null`` with the reason in ``clocks_error`` /
``clock_reasons_error``, never "off". The reasons are read from NVML's bitmasks
(``supported``, ``active``) under their R535+ name ``clocks_event_reasons`` and, on older
drivers, ``clocks_throttle_reasons``; a reason the GPU does not support is ``null``.
Locked clocks (``nvidia-smi -lgc``) have no query field: NVML reports any user clock
setting, application or locked, as the ``applications_clocks_setting`` reason
(``nvmlClocksThrottleReasonUserDefinedClocks``).
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from driftwatch.probes.base import Facts, ProbeContext, ProbeError


@dataclass(frozen=True)
class GpuField:
    """One ``--query-gpu`` field and where its value goes in the facts."""

    query: str
    key: str
    kind: type = str
    volatile: bool = False
    # Newer than some drivers still in use (MIG: R450; compute_cap, memory.reserved:
    # ~R510). An older driver rejects the whole query over one unknown field.
    optional: bool = False


# In the order the facts list them.
FIELDS: tuple[GpuField, ...] = (
    GpuField("uuid", "uuid"),
    GpuField("driver_version", "driver_version"),
    GpuField("index", "index", int),
    GpuField("name", "name"),
    GpuField("pci.bus_id", "bus_id"),
    GpuField("memory.total", "memory_total_mib", int),
    GpuField("memory.reserved", "memory_reserved_mib", int, optional=True),
    GpuField("memory.used", "memory_used_mib", int),
    GpuField("memory.free", "memory_free_mib", int),
    GpuField("persistence_mode", "persistence_mode"),
    GpuField("mig.mode.current", "mig_mode", optional=True),
    GpuField("ecc.mode.current", "ecc_mode"),
    GpuField("ecc.errors.uncorrected.volatile.total", "ecc_uncorrected_volatile", int),
    GpuField("ecc.errors.corrected.volatile.total", "ecc_corrected_volatile", int),
    # "Yes" when a retirement or row remap waits for the next GPU reset (or remapping failed).
    GpuField("retired_pages.pending", "retired_pages_pending", optional=True),
    GpuField("remapped_rows.pending", "remapped_rows_pending", optional=True),
    GpuField("remapped_rows.failure", "remapped_rows_failure", optional=True),
    GpuField("pcie.link.gen.current", "pcie_gen", int),
    GpuField("pcie.link.width.current", "pcie_width", int),
    GpuField("pcie.link.gen.max", "pcie_gen_max", int),
    GpuField("pcie.link.width.max", "pcie_width_max", int),
    GpuField("compute_cap", "compute_cap", optional=True),
    GpuField("power.limit", "power_limit_w", float),
    GpuField("temperature.gpu", "temperature_c", int, volatile=True),
    GpuField("power.draw", "power_draw_w", float, volatile=True),
    GpuField("clocks.current.sm", "sm_clock_mhz", int, volatile=True),
    GpuField("utilization.gpu", "utilization_gpu_pct", int, volatile=True),
    GpuField("utilization.memory", "utilization_memory_pct", int, volatile=True),
)
# The power and clock call's fields (one call of their own, see the module docstring).
CLOCK_FIELDS: tuple[GpuField, ...] = (
    GpuField("enforced.power.limit", "power_enforced_limit_w", float),
    GpuField("power.default_limit", "power_default_limit_w", float),
    GpuField("power.max_limit", "power_max_limit_w", float),
    # "[Requested functionality has been deprecated]" on Hopper and newer drivers: null.
    GpuField("clocks.applications.graphics", "app_clock_graphics_mhz", int),
    GpuField("clocks.applications.memory", "app_clock_memory_mhz", int),
    GpuField("clocks.default_applications.graphics", "default_app_clock_graphics_mhz", int),
    GpuField("clocks.default_applications.memory", "default_app_clock_memory_mhz", int),
    GpuField("clocks.max.sm", "max_clock_sm_mhz", int),
    GpuField("clocks.max.memory", "max_clock_memory_mhz", int),
    GpuField("pstate", "pstate", volatile=True),
)
# NVML's clock event reasons (nvml.h ``nvmlClocksEventReason*``), by bit.
CLOCK_REASONS: tuple[tuple[str, int], ...] = (
    ("gpu_idle", 0x1),
    ("applications_clocks_setting", 0x2),
    ("sw_power_cap", 0x4),
    ("hw_slowdown", 0x8),
    ("sync_boost", 0x10),
    ("sw_thermal_slowdown", 0x20),
    ("hw_thermal_slowdown", 0x40),
    ("hw_power_brake_slowdown", 0x80),
    ("display_clock_setting", 0x100),
)
# The reasons' bitmasks under the name drivers since R535 use, then the older one.
REASON_PREFIXES = ("clocks_event_reasons", "clocks_throttle_reasons")
_KINDS: dict[str, type] = {f.query: f.kind for f in (*FIELDS, *CLOCK_FIELDS)}
# The key and a host-wide value, not stored inside each GPU's facts.
_NOT_PER_GPU = {"uuid", "driver_version"}


def query_fields(*, optional: bool = True) -> list[str]:
    """Fields for ``--query-gpu``, ``name`` last.

    nvidia-smi does not quote its CSV, so the last column is the only one where a ", "
    inside a value cannot shift the others.
    """
    fields = [f.query for f in FIELDS if f.query != "name" and (optional or not f.optional)]
    return fields + ["name"]


# process_name last for the same reason as `name` above: paths may contain ", ".
COMPUTE_APPS_FIELDS: tuple[str, ...] = ("gpu_uuid", "pid", "used_gpu_memory", "process_name")
_APP_KINDS: dict[str, type] = {"pid": int, "used_gpu_memory": int}

# nvidia-smi's ways of saying "no value"; brackets also cover [Unknown Error] and
# [Insufficient Permissions], which are not values either.
_NO_VALUE = {"", "N/A", "[N/A]"}
_NUMBER = re.compile(r"^(-?\d+(?:\.\d+)?)(?:\s*[A-Za-z%/]+)?$")
_HEADER_UNIT = re.compile(r"\s*\[[^\]]*\]$")
# CSI sequences (ESC [ ... final byte), then the two-byte ESC forms.
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-_]")
_DRIVER = re.compile(r"\b(?:KMD|DRIVER) Version\s*:\s*(\d+(?:\.\d+)+)", re.IGNORECASE)
_CUDA = re.compile(r"\bCUDA(?: UMD)? Version\s*:\s*(\d+(?:\.\d+)+)", re.IGNORECASE)
_UNKNOWN_FIELD = "is not a valid field to query"
_NO_DEVICES = "No devices were found"


def convert(value: str, kind: type) -> Any:
    """Turn one CSV cell into ``kind``; units (`` MiB``) are dropped, non-values are None."""
    value = value.strip()
    if value in _NO_VALUE or (value.startswith("[") and value.endswith("]")):
        return None
    match = _NUMBER.match(value)
    if kind is str or match is None:
        # An unexpected string in a numeric column is kept as text rather than lost.
        return value
    number = float(match.group(1))
    return int(number) if kind is int else number


def _rows(text: str, fields: Sequence[str], key: str) -> list[dict[str, str]]:
    """Split nvidia-smi CSV into dicts by field name.

    A header line, recognised by naming the ``key`` column (a value never equals its own
    field name), replaces ``fields``: captures and ``csv`` without ``noheader`` carry one.
    """
    lines = [line for line in text.splitlines() if line.strip()]
    if lines:
        header = [_HEADER_UNIT.sub("", cell.strip()) for cell in lines[0].split(", ")]
        if key in header:
            fields, lines = header, lines[1:]
    rows = []
    for line in lines:
        cells = line.split(", ", len(fields) - 1)
        if len(cells) != len(fields):
            raise ValueError(f"expected {len(fields)} columns, got {len(cells)}: {line!r}")
        rows.append(dict(zip(fields, cells, strict=True)))
    return rows


def parse_query_gpu_csv(text: str, fields: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Parse ``--query-gpu=<fields> --format=csv[,noheader][,nounits]`` output by GPU UUID.

    Values are typed for the fields the probe knows (ints, floats); others stay strings.
    """
    gpus: dict[str, dict[str, Any]] = {}
    for row in _rows(text, fields, "uuid"):
        if "uuid" not in row:
            raise ValueError("query-gpu output has no uuid column")
        parsed = {name: convert(cell, _KINDS.get(name, str)) for name, cell in row.items()}
        gpus[str(parsed["uuid"])] = parsed
    return gpus


def parse_compute_apps_csv(
    text: str, fields: Sequence[str] = COMPUTE_APPS_FIELDS
) -> dict[str, dict[str, Any]]:
    """Parse ``--query-compute-apps`` output into processes keyed ``<gpu uuid>:<pid>``.

    Empty output and a lone header both mean no processes.
    """
    processes: dict[str, dict[str, Any]] = {}
    for row in _rows(text, fields, "gpu_uuid"):
        cells = {name: convert(cell, _APP_KINDS.get(name, str)) for name, cell in row.items()}
        uuid, pid = cells.get("gpu_uuid"), cells.get("pid")
        processes[f"{uuid}:{pid}"] = {
            "gpu_uuid": uuid,
            "pid": pid,
            "name": cells.get("process_name"),
            "used_mib": cells.get("used_gpu_memory"),
        }
    return processes


def parse_driver_cuda_version(text: str) -> tuple[str | None, str | None]:
    """(driver, CUDA) versions from ``nvidia-smi --version`` or the default table header.

    Driver 610 prints "DRIVER version : Deprecated, see "KMD version" instead"; only a
    number counts, so the KMD / CUDA UMD lines are used there.
    """
    driver, cuda = _DRIVER.search(text), _CUDA.search(text)
    return (driver.group(1) if driver else None, cuda.group(1) if cuda else None)


def clean_topology(text: str) -> str | None:
    """The ``nvidia-smi topo -m`` matrix without terminal escapes (it underlines its header).

    The legend below the matrix is dropped: it is the same on every host and its wording
    changes between drivers, which would show as a topology change.
    """
    text = _ANSI.sub("", text).split("\nLegend:", 1)[0]
    lines = [line.rstrip() for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines) or None


def gpu_facts(row: dict[str, Any], clocks: dict[str, Any] | None = None) -> dict[str, Any]:
    """Per-GPU facts from one parsed query-gpu row and its row of the power and clock call;
    fields not queried (or not answered) are None."""
    facts: dict[str, Any] = {}
    volatile: dict[str, Any] = {}
    for field in FIELDS:
        if field.query not in _NOT_PER_GPU:
            (volatile if field.volatile else facts)[field.key] = row.get(field.query)
    clocks = clocks or {}
    for field in CLOCK_FIELDS:
        (volatile if field.volatile else facts)[field.key] = clocks.get(field.query)
    volatile["clock_event_reasons"] = clock_reasons(clocks)
    facts["volatile"] = volatile
    return facts


def query_gpu_block(marker: str, full: str, core: str) -> str:
    """sh printing the ``query-gpu`` block: ``full`` fields, and once more with ``core`` only
    when the driver refuses one of them (nvidia-smi names only the first unknown field)."""
    fmt = "--format=csv,noheader,nounits"
    return f"""fields={full}
  out=$(nvidia-smi --query-gpu=$fields {fmt} 2>&1); rc=$?
  case "$out" in *"{_UNKNOWN_FIELD}"*)
    fields={core}
    out=$(nvidia-smi --query-gpu=$fields {fmt} 2>&1); rc=$? ;;
  esac
  printf '%s\\n%s\\n' "{marker} query-gpu $rc $fields" "$out"
"""


def clock_reasons(row: dict[str, Any]) -> dict[str, bool | None] | None:
    """Each clock event reason, asserted or not, from the ``supported`` and ``active``
    bitmasks of either name; a reason the GPU does not support is None, and without both
    masks (an older driver, a failed call) the whole is None: unknown, never "not active"."""
    for prefix in REASON_PREFIXES:
        supported, active = _mask(row.get(f"{prefix}.supported")), _mask(row.get(f"{prefix}.active"))
        if supported is not None and active is not None:
            return {name: bool(active & bit) if supported & bit else None for name, bit in CLOCK_REASONS}
    return None


def _mask(value: Any) -> int | None:
    if not isinstance(value, str):
        return None
    try:
        return int(value.strip(), 16)
    except ValueError:
        return None


def build_script(marker: str) -> str:
    """The one remote script; ``marker`` is random so no output line can forge a block."""
    full, core = ",".join(query_fields()), ",".join(query_fields(optional=False))
    clocks = ",".join(["uuid", *(f.query for f in CLOCK_FIELDS)])
    with_reasons = [f"{clocks},{prefix}.supported,{prefix}.active" for prefix in REASON_PREFIXES]
    apps = ",".join(COMPUTE_APPS_FIELDS)
    fmt = "--format=csv,noheader,nounits"
    # One retry without the optional fields, not one per field: nvidia-smi names only the
    # first unknown field, so peeling them off one by one could take several calls.
    # The power and clock call steps down from the R535 reason names to the older ones,
    # then to no reasons at all, so an older driver keeps its power limits.
    # The five calls run side by side: on a host where every nvidia-smi call is slow (a
    # GPU in a bad state), the probe costs one slow call, not five.
    # A missing, read-only or full temp folder says nothing about the driver: without a
    # folder to collect them in (or with a block it could not hold), the calls run one
    # after another, straight to the output.
    return f"""\
command -v nvidia-smi >/dev/null 2>&1 || {{ echo "{marker} missing 127"; exit 0; }}
q1() {{ out=$(nvidia-smi --version 2>&1) || out=$(nvidia-smi 2>&1)
  printf '%s\\n%s\\n' "{marker} version $?" "$out"; }}
q2() {{ {query_gpu_block(marker, full, core)}}}
q3() {{ out=$(nvidia-smi --query-compute-apps={apps} {fmt} 2>&1)
  printf '%s\\n%s\\n' "{marker} compute-apps $?" "$out"; }}
q4() {{ out=$(nvidia-smi topo -m 2>&1)
  printf '%s\\n%s\\n' "{marker} topo $?" "$out"; }}
q5() {{ for fields in {with_reasons[0]} {with_reasons[1]} {clocks}; do
    out=$(nvidia-smi --query-gpu=$fields {fmt} 2>&1); rc=$?
    case "$out" in *"{_UNKNOWN_FIELD}"*) continue ;; esac
    break
  done
  printf '%s\\n%s\\n' "{marker} clocks $rc $fields" "$out"; }}
trap 'exit 124' TERM INT
if d=$(mktemp -d 2>/dev/null); then
  trap 'rm -rf "$d"' EXIT
  q1 >"$d/1" 2>/dev/null & p1=$!
  q2 >"$d/2" 2>/dev/null & p2=$!
  q3 >"$d/3" 2>/dev/null & p3=$!
  q4 >"$d/4" 2>/dev/null & p4=$!
  q5 >"$d/5" 2>/dev/null & p5=$!
  for i in 1 2 3 4 5; do
    eval "p=\\$p$i"
    if wait "$p"; then cat "$d/$i"; else q$i; fi
  done
else
  q1; q2; q3; q4; q5
fi
"""


@dataclass
class Block:
    """One command's output in the script's output, behind its marker line."""

    rc: int
    args: list[str]
    lines: list[str]

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


def parse_blocks(text: str, marker: str) -> dict[str, Block]:
    """Split the script's output into its blocks, by name."""
    blocks: dict[str, Block] = {}
    current: Block | None = None
    for line in text.splitlines():
        if line.startswith(marker + " "):
            name, rc, *args = line[len(marker) + 1 :].split(" ")
            current = blocks[name] = Block(int(rc), args, [])
        elif current is not None:
            current.lines.append(line)
    return blocks


def facts_from_blocks(blocks: dict[str, Block]) -> Facts:
    """Assemble the gpu facts; only a failed GPU query fails the probe."""
    if "missing" in blocks:
        raise ProbeError("nvidia-smi not found")
    query = blocks.get("query-gpu")
    if query is None:
        raise ProbeError("nvidia-smi produced no query-gpu output")
    if query.rc != 0 and _NO_DEVICES not in query.text:
        raise ProbeError(f"nvidia-smi --query-gpu failed: {_message(query.text, query.rc)}")
    fields = query.args[0].split(",") if query.args else query_fields()
    try:
        rows = parse_query_gpu_csv(query.text, fields) if query.rc == 0 else {}
        processes = _processes(blocks.get("compute-apps"))
    except ValueError as exc:
        raise ProbeError(f"unexpected nvidia-smi output: {exc}") from exc
    version = blocks.get("version")
    driver, cuda = parse_driver_cuda_version(version.text if version else "")
    drivers = [row["driver_version"] for row in rows.values() if row.get("driver_version")]
    topo = blocks.get("topo")
    clocks, clocks_error, reasons_error = _clocks(blocks.get("clocks"))
    return {
        "driver_version": driver or (drivers[0] if drivers else None),
        "cuda_version": cuda,
        "gpus": {uuid: gpu_facts(row, clocks.get(uuid)) for uuid, row in rows.items()},
        "processes": processes,
        "topology": clean_topology(topo.text) if topo and topo.rc == 0 else None,
        "clocks_error": clocks_error,
        "clock_reasons_error": reasons_error,
    }


def _clocks(block: Block | None) -> tuple[dict[str, dict[str, Any]], str | None, str | None]:
    """The power and clock call's rows by UUID, why they are unknown (the call failed), and
    why the clock event reasons are (this driver reports none under either name)."""
    if block is None:
        return {}, "nvidia-smi produced no power and clock output", "not read"
    if block.rc != 0:
        message = _message(block.text, block.rc)
        return {}, f"nvidia-smi power and clock query failed: {message}", "not read"
    fields = block.args[0].split(",") if block.args else []
    try:
        rows = parse_query_gpu_csv(block.text, fields)
    except ValueError as exc:
        return {}, f"unexpected nvidia-smi power and clock output: {exc}", "not read"
    reasons = any(field.endswith(".active") for field in fields)
    return rows, None, None if reasons else "this driver knows neither clocks_event_reasons nor clocks_throttle_reasons"


def _processes(block: Block | None) -> dict[str, dict[str, Any]] | None:
    """Processes, {} when there is no GPU, and null (never a faked {}) when unknown."""
    if block is not None and block.rc == 0:
        return parse_compute_apps_csv(block.text)
    return {} if block is not None and _NO_DEVICES in block.text else None


def _message(text: str, rc: int) -> str:
    """What nvidia-smi said when it failed, whole (it says it in one to three lines):
    "Failed to initialize NVML: Driver/library version mismatch / NVML library version:
    580.178" -- the last line alone would drop the cause."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    message = " / ".join(lines) if lines else f"exit {rc}"
    return message if len(message) <= 300 else message[:299] + "…"


class GpuProbe:
    name = "gpu"

    def collect(self, ctx: ProbeContext) -> Facts:
        marker = "@@driftwatch-gpu-" + secrets.token_hex(8)
        result = ctx.run(build_script(marker))
        return facts_from_blocks(parse_blocks(result.text, marker))
