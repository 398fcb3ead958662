"""The gpu probe: its parsers over every real nvidia-smi capture, and whole runs against a
fake nvidia-smi that replays those captures (including one that hangs)."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass, field, replace
from importlib.machinery import SourceFileLoader
from pathlib import Path
from types import ModuleType

import pytest

from driftwatch.collect import run_probe
from driftwatch.model import ProbeStatus
from driftwatch.probes.base import Facts, ProbeContext, ProbeError, ProbeTimeout
from driftwatch.probes.gpu import (
    CLOCK_FIELDS,
    CLOCK_REASONS,
    GpuProbe,
    clean_topology,
    clock_reasons,
    parse_compute_apps_csv,
    parse_driver_cuda_version,
    parse_query_gpu_csv,
)
from driftwatch.transport.local import LocalTransport

TESTS = Path(__file__).resolve().parents[1]
CAPTURES = TESTS / "fixtures" / "nvidia-smi"
FAKE = TESTS / "fakes" / "nvidia-smi"


def _load_fake() -> ModuleType:
    # The fake's own capture reader, so tests and fake agree on what a section is.
    spec = importlib.util.spec_from_loader("fake_nvidia_smi", SourceFileLoader("fake_nvidia_smi", str(FAKE)))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


fake = _load_fake()

UUID = "GPU-00000000-0000-0000-0000-000000000000"  # the captures mask every UUID to this


@dataclass(frozen=True)
class Expected:
    """What each capture says, read off it by hand."""

    driver: str
    cuda: str
    name: str
    bus_id: str
    memory_total_mib: int
    compute_cap: str
    mig_mode: str | None
    ecc_mode: str | None
    power_limit_w: float
    processes: dict[str, dict[int, tuple[str, int]]] = field(default_factory=dict)  # by phase


def memhogs(pids: tuple[int, int, int], mib: tuple[int, int, int]) -> dict[int, tuple[str, int]]:
    """The datacenter captures' load: two CUDA memhogs and gpu-burn."""
    names = ("/root/tools/memhog", "/root/tools/memhog", "./gpu_burn")
    return {pid: (name, used) for pid, name, used in zip(pids, names, mib, strict=True)}


RTX2080 = Expected(
    driver="595.71.05", cuda="13.2", name="NVIDIA GeForce RTX 2080 SUPER", bus_id="00000000:0C:00.0",
    memory_total_mib=8192, compute_cap="7.5", mig_mode=None, ecc_mode=None, power_limit_w=250.0,
    processes={"idle": {}, "load": {5268: ("ffmpeg", 370), 5267: ("ffmpeg", 230)}},
)
H100 = Expected(
    driver="590.48.01", cuda="13.1", name="NVIDIA H100 80GB HBM3", bus_id="00000000:00:09.0",
    memory_total_mib=81559, compute_cap="9.0", mig_mode="Disabled", ecc_mode="Enabled",
    power_limit_w=700.0,
    processes={"idle": {}, "load": memhogs((11327, 11328, 11345), (2566, 1542, 15690))},
)
H200 = replace(
    H100, name="NVIDIA H200", bus_id="00000000:83:00.0", memory_total_mib=143771,
    processes={"idle": {}, "load": memhogs((10291, 10293, 10309), (2566, 1542, 28234))},
)
EXPECTED: dict[str, Expected] = {
    "linux-x86_64__nvidia-geforce-rtx-2080-super__595.71.05.txt": RTX2080,
    # Driver 610 deprecates "DRIVER version" / "CUDA Version" in favour of KMD / CUDA UMD.
    "linux-x86_64__nvidia-geforce-rtx-2080-super__610.57.04.txt": replace(
        RTX2080, driver="610.57.04", cuda="13.3",
        processes={"idle": {}, "load": {28512: ("ffmpeg", 370), 28511: ("ffmpeg", 230)}},
    ),
    "linux-x86_64__nvidia-geforce-rtx-4080-super__595.71.05.txt": replace(
        RTX2080, name="NVIDIA GeForce RTX 4080 SUPER", bus_id="00000000:01:00.0",
        memory_total_mib=16376, compute_cap="8.9", power_limit_w=320.0,
        processes={
            "idle": {2165: ("/usr/bin/kwin_wayland", 25)},
            "load": {2165: ("/usr/bin/kwin_wayland", 25), 5022: ("ffmpeg", 503), 5021: ("ffmpeg", 360)},
        },
    ),
    "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.txt": H100,
    "linux-x86_64__nvidia-h100-mig__590.48.01.txt": replace(
        H100, mig_mode="Enabled",
        processes={"idle": {}, "load": memhogs((21180, 21181, 21198), (2296, 1272, 7484))},
    ),
    "linux-x86_64__nvidia-h200-mig__590.48.01.txt": replace(
        H200, mig_mode="Enabled",
        processes={"idle": {}, "load": memhogs((12249, 12250, 12267), (2194, 1170, 13526))},
    ),
    "linux-x86_64__nvidia-h200__590.48.01.txt": H200,
    # A two-part driver version: it must stay the string "595.80", not become 595.8.
    "linux-x86_64__nvidia-l40s__595.80.txt": Expected(
        driver="595.80", cuda="13.2", name="NVIDIA L40S", bus_id="00000000:01:00.0",
        memory_total_mib=46068, compute_cap="8.9", mig_mode=None, ecc_mode="Enabled",
        power_limit_w=350.0,
        processes={"idle": {}, "load": {20037: ("ffmpeg", 538), 20038: ("ffmpeg", 681)}},
    ),
}
# Every capture in the folder, so a new capture without expectations fails loudly.
CAPTURE_NAMES = sorted(p.name for p in CAPTURES.glob("*.txt"))
PHASES = ("idle", "load")
GPU_KEYS = {
    "index", "name", "bus_id", "memory_total_mib", "memory_reserved_mib", "memory_used_mib",
    "memory_free_mib", "persistence_mode", "mig_mode", "ecc_mode", "ecc_uncorrected_volatile",
    "ecc_corrected_volatile", "retired_pages_pending", "remapped_rows_pending", "remapped_rows_failure",
    "pcie_gen", "pcie_width", "pcie_gen_max", "pcie_width_max", "compute_cap", "power_limit_w", "volatile",
    "power_enforced_limit_w", "power_default_limit_w", "power_max_limit_w", "app_clock_graphics_mhz",
    "app_clock_memory_mhz", "default_app_clock_graphics_mhz", "default_app_clock_memory_mhz",
    "max_clock_sm_mhz", "max_clock_memory_mhz",
}
VOLATILE_KEYS = {
    "temperature_c", "power_draw_w", "sm_clock_mhz", "utilization_gpu_pct", "utilization_memory_pct",
    "pstate", "clock_event_reasons",
}
TOP_KEYS = {"driver_version", "cuda_version", "gpus", "processes", "topology", "clocks_error", "clock_reasons_error"}
NO_VALUE = {"[N/A]", "[Not Supported]", "[Requested functionality has been deprecated]", ""}


def section(capture: str, phase: str, title: str) -> tuple[str, str]:
    """(command, body) of the capture's section ``<phase> :: <title…>``."""
    for sec_phase, name, command, body in fake.read_sections(str(CAPTURES / capture)):
        if sec_phase == phase and name.startswith(title):
            return command or "", "\n".join(body)
    raise AssertionError(f"{capture} has no {phase} :: {title} section")


def queried_fields(command: str) -> list[str]:
    return command.split("=", 1)[1].split(" ")[0].split(",")


def test_every_capture_has_expectations() -> None:
    assert CAPTURE_NAMES and set(CAPTURE_NAMES) == set(EXPECTED)
    assert (CAPTURES / "LICENSE.nvidia_gpu_exporter").read_text().startswith("MIT License")


# --- pure parsers over the captures ---------------------------------------------------


@pytest.mark.parametrize("phase", PHASES)
@pytest.mark.parametrize("capture", CAPTURE_NAMES)
def test_parse_query_gpu_capture(capture: str, phase: str) -> None:
    command, body = section(capture, phase, "query-gpu")
    fields = queried_fields(command)
    gpus = parse_query_gpu_csv(body, fields)
    want = EXPECTED[capture]

    assert list(gpus) == [UUID]
    gpu = gpus[UUID]
    assert gpu["driver_version"] == want.driver
    assert gpu["name"] == want.name
    assert gpu["pci.bus_id"] == want.bus_id
    assert gpu["memory.total"] == want.memory_total_mib
    assert gpu["compute_cap"] == want.compute_cap
    assert gpu["mig.mode.current"] == want.mig_mode
    assert gpu["ecc.mode.current"] == want.ecc_mode
    assert gpu["power.limit"] == want.power_limit_w and isinstance(gpu["power.limit"], float)
    assert gpu["index"] == 0
    for key in ("memory.used", "memory.free", "memory.reserved", "pcie.link.gen.max"):
        assert isinstance(gpu[key], int), key
    # nvidia-smi rounds each figure to MiB on its own, so they may miss the total by one.
    parts = gpu["memory.used"] + gpu["memory.free"] + gpu["memory.reserved"]
    assert abs(parts - want.memory_total_mib) <= 2
    # Every "no value" cell of the raw row, whatever its column, is None.
    raw = dict(zip(fields, body.splitlines()[1].split(", "), strict=True))
    empty = [name for name, cell in raw.items() if cell in NO_VALUE]
    assert empty and all(gpu[name] is None for name in empty)


@pytest.mark.parametrize("phase", PHASES)
@pytest.mark.parametrize("capture", CAPTURE_NAMES)
def test_parse_compute_apps_capture(capture: str, phase: str) -> None:
    _, body = section(capture, phase, "query-compute-apps")
    processes = parse_compute_apps_csv(body)
    want = EXPECTED[capture].processes[phase]
    assert processes == {
        f"{UUID}:{pid}": {"gpu_uuid": UUID, "pid": pid, "name": name, "used_mib": mib}
        for pid, (name, mib) in want.items()
    }


@pytest.mark.parametrize("capture", CAPTURE_NAMES)
def test_parse_versions_from_version_and_table(capture: str) -> None:
    want = EXPECTED[capture]
    _, version = section(capture, "capabilities", "version")
    _, table = section(capture, "idle", "nvidia-smi (default table)")
    assert parse_driver_cuda_version(version) == (want.driver, want.cuda)
    assert parse_driver_cuda_version(table) == (want.driver, want.cuda)


@pytest.mark.parametrize("capture", CAPTURE_NAMES)
def test_clean_topology_capture(capture: str) -> None:
    _, raw = section(capture, "capabilities", "topo -m")
    assert "\x1b[4m" in raw  # the captures really carry the underline escape
    topology = clean_topology(raw)
    assert topology is not None and "\x1b" not in topology
    assert topology.splitlines()[0] == "\tGPU0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID"
    assert topology.splitlines()[1].startswith("GPU0\t X \t")
    assert "Legend" not in topology


def test_parse_noheader_nounits_two_gpus_and_commas_in_last_column() -> None:
    text = (
        "0, GPU-aaaa, 81559, 1.50, NVIDIA H100 80GB HBM3\n"
        "1, GPU-bbbb, [N/A], [Not Supported], Some, Odd, Name\n"
    )
    gpus = parse_query_gpu_csv(text, ["index", "uuid", "memory.total", "power.draw", "name"])
    assert gpus == {
        "GPU-aaaa": {"index": 0, "uuid": "GPU-aaaa", "memory.total": 81559,
                     "power.draw": 1.5, "name": "NVIDIA H100 80GB HBM3"},
        "GPU-bbbb": {"index": 1, "uuid": "GPU-bbbb", "memory.total": None,
                     "power.draw": None, "name": "Some, Odd, Name"},
    }


def test_parse_query_gpu_rejects_short_rows() -> None:
    with pytest.raises(ValueError, match="expected 3 columns"):
        parse_query_gpu_csv("0, GPU-aaaa\n", ["index", "uuid", "name"])


@pytest.mark.parametrize(
    "text",
    ["", "\n", "gpu_uuid, pid, used_gpu_memory [MiB], process_name\n"],
    ids=["empty", "blank", "header"],
)
def test_parse_compute_apps_without_processes(text: str) -> None:
    assert parse_compute_apps_csv(text) == {}


def test_parse_compute_apps_unknown_memory_is_none() -> None:
    processes = parse_compute_apps_csv("GPU-aaaa, 42, [N/A], python3 -m sglang.launch_server, x\n")
    assert processes == {"GPU-aaaa:42": {"gpu_uuid": "GPU-aaaa", "pid": 42, "used_mib": None,
                                         "name": "python3 -m sglang.launch_server, x"}}


def test_versions_absent() -> None:
    assert parse_driver_cuda_version("NVIDIA-SMI has failed because it couldn't communicate") == (None, None)


# --- whole probe against the fake nvidia-smi ------------------------------------------


def collect(capture: str, monkeypatch: pytest.MonkeyPatch, **env: str) -> Facts:
    monkeypatch.setenv("FAKE_NVIDIA_SMI_CAPTURE", str(CAPTURES / capture))
    for name, value in env.items():
        monkeypatch.setenv(f"FAKE_NVIDIA_SMI_{name.upper()}", value)
    return GpuProbe().collect(ProbeContext(transport=LocalTransport()))


def calls(fake_smi: Path) -> list[str]:
    return (fake_smi.parent / "calls.log").read_text().splitlines()


@pytest.mark.parametrize("phase", PHASES)
@pytest.mark.parametrize("capture", CAPTURE_NAMES)
def test_probe_facts(capture: str, phase: str, fake_smi: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    facts = collect(capture, monkeypatch, phase=phase)
    want = EXPECTED[capture]

    assert set(facts) == TOP_KEYS and facts["clocks_error"] is None and facts["clock_reasons_error"] is None
    assert (facts["driver_version"], facts["cuda_version"]) == (want.driver, want.cuda)
    gpu = facts["gpus"][UUID]
    assert set(gpu) == GPU_KEYS and set(gpu["volatile"]) == VOLATILE_KEYS
    assert (gpu["index"], gpu["name"], gpu["bus_id"]) == (0, want.name, want.bus_id)
    assert gpu["memory_total_mib"] == want.memory_total_mib
    assert gpu["compute_cap"] == want.compute_cap
    assert (gpu["mig_mode"], gpu["ecc_mode"]) == (want.mig_mode, want.ecc_mode)
    assert gpu["power_limit_w"] == want.power_limit_w
    for key in ("memory_reserved_mib", "memory_used_mib", "memory_free_mib"):
        assert isinstance(gpu[key], int), key
    assert isinstance(gpu["volatile"]["power_draw_w"], float)
    processes = {p["pid"]: (p["name"], p["used_mib"]) for p in facts["processes"].values()}
    assert processes == want.processes[phase]
    assert "\x1b" not in facts["topology"] and facts["topology"].startswith("\tGPU0\tCPU Affinity")
    assert gpu["power_default_limit_w"] == want.power_limit_w  # every capture runs at its default
    assert isinstance(gpu["volatile"]["clock_event_reasons"], dict)
    # One script: one call each for version, GPUs, power and clocks, processes and topology; no retry.
    assert len(calls(fake_smi)) == 5


def test_probe_h200_exact_facts(fake_smi: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    facts = collect("linux-x86_64__nvidia-h200__590.48.01.txt", monkeypatch, phase="load")
    assert facts["gpus"] == {UUID: {
        "index": 0, "name": "NVIDIA H200", "bus_id": "00000000:83:00.0",
        "memory_total_mib": 143771, "memory_reserved_mib": 614, "memory_used_mib": 32362,
        "memory_free_mib": 110796, "persistence_mode": "Enabled", "mig_mode": "Disabled",
        "ecc_mode": "Enabled", "ecc_uncorrected_volatile": 0, "ecc_corrected_volatile": 0,
        # The H200's driver: pages are remapped by rows, so retirement is [N/A].
        "retired_pages_pending": None, "remapped_rows_pending": "No", "remapped_rows_failure": "No",
        "pcie_gen": 5, "pcie_width": 16, "pcie_gen_max": 5, "pcie_width_max": 16,
        "compute_cap": "9.0", "power_limit_w": 700.0,
        "power_enforced_limit_w": 700.0, "power_default_limit_w": 700.0, "power_max_limit_w": 700.0,
        # Hopper's driver 590: "[Requested functionality has been deprecated]".
        "app_clock_graphics_mhz": None, "app_clock_memory_mhz": None,
        "default_app_clock_graphics_mhz": None, "default_app_clock_memory_mhz": None,
        "max_clock_sm_mhz": 1980, "max_clock_memory_mhz": 3201,
        "volatile": {"temperature_c": 52, "power_draw_w": 627.4, "sm_clock_mhz": 1980,
                     "utilization_gpu_pct": 100, "utilization_memory_pct": 7, "pstate": "P0",
                     "clock_event_reasons": {name: False for name, _ in CLOCK_REASONS}},
    }}
    assert facts["processes"][f"{UUID}:10309"] == {
        "gpu_uuid": UUID, "pid": 10309, "name": "./gpu_burn", "used_mib": 28234,
    }


def test_probe_mig_utilization_is_null(fake_smi: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    facts = collect("linux-x86_64__nvidia-h100-mig__590.48.01.txt", monkeypatch, phase="load")
    volatile = facts["gpus"][UUID]["volatile"]
    assert volatile["utilization_gpu_pct"] is None and volatile["utilization_memory_pct"] is None
    assert volatile["power_draw_w"] == 433.78


def test_older_driver_falls_back_with_one_retry(fake_smi: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # An older driver that knows neither compute_cap nor memory.reserved.
    facts = collect("linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.txt", monkeypatch,
                    reject="compute_cap,memory.reserved")
    gpu = facts["gpus"][UUID]
    assert gpu["compute_cap"] is None and gpu["memory_reserved_mib"] is None and gpu["mig_mode"] is None
    assert gpu["memory_total_mib"] == 81559 and gpu["name"] == "NVIDIA H100 80GB HBM3"
    assert gpu["volatile"]["temperature_c"] == 41
    queries = [c for c in calls(fake_smi) if c.startswith("--query-gpu=") and "power.default_limit" not in c]
    assert len(queries) == 2 and "compute_cap" in queries[0] and "compute_cap" not in queries[1]


def test_rejected_core_field_is_an_error(fake_smi: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ProbeError, match='Field "power.limit" is not a valid field'):
        collect("linux-x86_64__nvidia-h200__590.48.01.txt", monkeypatch, reject="power.limit")


def test_missing_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Only what the transport itself needs, so a real nvidia-smi on this machine is hidden.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("sh", "timeout"):
        (bin_dir / tool).symlink_to(shutil.which(tool) or f"/usr/bin/{tool}")
    monkeypatch.setenv("PATH", str(bin_dir))
    record = run_probe(GpuProbe(), ProbeContext(transport=LocalTransport()))
    assert record.status is ProbeStatus.error and record.error == "nvidia-smi not found"


def _fake_processes(marker: str) -> list[str]:
    found = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True)
    return found.stdout.split()


@pytest.mark.skipif(shutil.which("pgrep") is None, reason="needs pgrep")
def test_hung_nvidia_smi_times_out_and_is_killed(fake_smi: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_NVIDIA_SMI_CAPTURE", str(CAPTURES / "linux-x86_64__nvidia-h200__590.48.01.txt"))
    monkeypatch.setenv("FAKE_NVIDIA_SMI_HANG", "1")
    outcome: list[BaseException | None] = []

    def probe() -> None:
        try:
            GpuProbe().collect(ProbeContext(transport=LocalTransport(), timeout=1))
            outcome.append(None)
        except BaseException as exc:  # handed to the test thread below
            outcome.append(exc)

    start = time.monotonic()
    worker = threading.Thread(target=probe)
    worker.start()
    # The hung fake is visible while it hangs, so the check after the kill can fail.
    seen = False
    while worker.is_alive() and not seen:
        seen = bool(_fake_processes(fake_smi.name))
        time.sleep(0.05)
    worker.join(timeout=10)
    elapsed = time.monotonic() - start

    assert seen
    assert len(outcome) == 1 and isinstance(outcome[0], ProbeTimeout)
    assert elapsed < 5
    time.sleep(0.5)
    assert _fake_processes(fake_smi.name) == []


def test_a_failing_nvidia_smi_keeps_its_whole_message() -> None:
    # What nvidia-smi prints after the userspace driver was upgraded under a loaded module
    # (https://github.com/zzzhouuu/truenas-nvidia-drivers/issues/19): the cause is the first line.
    from driftwatch.probes.gpu import Block, facts_from_blocks

    lines = ["Failed to initialize NVML: Driver/library version mismatch", "NVML library version: 580.178"]
    with pytest.raises(ProbeError) as failed:
        facts_from_blocks({"query-gpu": Block(rc=18, args=[], lines=lines)})
    assert str(failed.value) == ("nvidia-smi --query-gpu failed: Failed to initialize NVML: Driver/library version "
                                 "mismatch / NVML library version: 580.178")


# --- power limits, clocks and clock event reasons ---------------------------------------


@pytest.mark.parametrize("phase", PHASES)
@pytest.mark.parametrize("capture", CAPTURE_NAMES)
def test_clock_reasons_decode_as_nvidia_smi_names_them(capture: str, phase: str) -> None:
    """The reasons read from the two bitmasks agree with nvidia-smi's own per-reason columns
    ("Active" / "Not Active") in the same row of every capture."""
    command, body = section(capture, phase, "query-gpu")
    row = parse_query_gpu_csv(body, queried_fields(command))[UUID]
    reasons = clock_reasons(row)
    assert reasons is not None
    named = {name: row[f"clocks_event_reasons.{name}"] for name, _ in CLOCK_REASONS
             if f"clocks_event_reasons.{name}" in row}
    assert len(named) >= 8
    assert {name: reasons[name] for name in named} == {name: cell == "Active" for name, cell in named.items()}
    assert all(clock.query in row for clock in CLOCK_FIELDS)


def test_clock_reasons_the_gpu_does_not_support_are_unknown() -> None:
    row = {"clocks_throttle_reasons.supported": "0x000000000000000F", "clocks_throttle_reasons.active": "0x4"}
    reasons = clock_reasons(row)
    assert reasons is not None and reasons["sw_power_cap"] is True and reasons["gpu_idle"] is False
    assert reasons["hw_power_brake_slowdown"] is None and reasons["sync_boost"] is None
    assert clock_reasons({"clocks_event_reasons.active": "0x4"}) is None  # no supported mask: unknown
    assert clock_reasons({"clocks_event_reasons.supported": "[N/A]", "clocks_event_reasons.active": "0x0"}) is None


def test_idle_geforce_capture_reports_its_sw_power_cap(fake_smi: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    facts = collect("linux-x86_64__nvidia-geforce-rtx-2080-super__595.71.05.txt", monkeypatch)
    gpu = facts["gpus"][UUID]
    assert (gpu["power_limit_w"], gpu["power_default_limit_w"], gpu["power_max_limit_w"]) == (250.0, 250.0, 350.0)
    assert gpu["volatile"]["pstate"] == "P8"
    reasons = gpu["volatile"]["clock_event_reasons"]
    assert [name for name, on in reasons.items() if on] == ["sw_power_cap"]


def test_driver_without_clocks_event_reasons_uses_the_throttle_names(
    fake_smi: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before R535 the bitmasks were only clocks_throttle_reasons.*.
    facts = collect("linux-x86_64__nvidia-geforce-rtx-2080-super__595.71.05.txt", monkeypatch,
                    reject="clocks_event_reasons.supported")
    assert facts["clock_reasons_error"] is None
    assert facts["gpus"][UUID]["volatile"]["clock_event_reasons"]["sw_power_cap"] is True
    clocks = [c for c in calls(fake_smi) if "power.default_limit" in c]
    assert len(clocks) == 2 and "clocks_throttle_reasons.active" in clocks[1]


def test_driver_without_any_reason_fields_keeps_its_power_limits(
    fake_smi: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    facts = collect("linux-x86_64__nvidia-h200__590.48.01.txt", monkeypatch,
                    reject="clocks_event_reasons.supported,clocks_throttle_reasons.supported")
    gpu = facts["gpus"][UUID]
    assert gpu["volatile"]["clock_event_reasons"] is None  # unknown, never "not active"
    assert "neither clocks_event_reasons nor clocks_throttle_reasons" in facts["clock_reasons_error"]
    assert gpu["power_default_limit_w"] == 700.0 and facts["clocks_error"] is None
    assert len([c for c in calls(fake_smi) if "power.default_limit" in c]) == 3


def test_failed_power_query_is_unknown_not_off(fake_smi: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    facts = collect("linux-x86_64__nvidia-h200__590.48.01.txt", monkeypatch, reject="power.default_limit")
    gpu = facts["gpus"][UUID]
    assert 'Field "power.default_limit" is not a valid field' in facts["clocks_error"]
    assert gpu["power_default_limit_w"] is None and gpu["volatile"]["clock_event_reasons"] is None
    assert gpu["power_limit_w"] == 700.0 and gpu["name"] == "NVIDIA H200"  # the GPU query is whole
