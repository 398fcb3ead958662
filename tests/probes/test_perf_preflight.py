"""The perf preflight against the real nvidia-smi captures, replayed by the fake: which
GPUs may be measured, and the reason a busy or MIG GPU is refused."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from driftwatch.probes.base import ProbeContext, ProbeError
from driftwatch.probes.perf_preflight import MAX_USED_MIB, Preflight, process_label, refusal, run_preflight
from driftwatch.transport.local import LocalTransport

TESTS = Path(__file__).resolve().parents[1]
CAPTURES = TESTS / "fixtures" / "nvidia-smi"
UUID = "GPU-00000000-0000-0000-0000-000000000000"

# capture → phase → the refusal (None: every GPU idle), read without /proc's command lines.
EXPECTED = {
    "linux-x86_64__nvidia-geforce-rtx-2080-super__595.71.05.txt": {
        "idle": None, "load": "GPU 0 busy: ffmpeg pid 5268, 370 MiB; 1 more process on it"},
    "linux-x86_64__nvidia-geforce-rtx-2080-super__610.57.04.txt": {
        "idle": None, "load": "GPU 0 busy: ffmpeg pid 28512, 370 MiB; 1 more process on it"},
    "linux-x86_64__nvidia-geforce-rtx-4080-super__595.71.05.txt": {
        # A desktop's compositor holds a CUDA context: a process is a process.
        "idle": "GPU 0 busy: kwin_wayland pid 2165, 25 MiB",
        "load": "GPU 0 busy: ffmpeg pid 5022, 503 MiB; 2 more processes on it"},
    "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.txt": {
        "idle": None, "load": "GPU 0 busy: gpu_burn pid 11345, 15.3 GiB; 2 more processes on it"},
    "linux-x86_64__nvidia-h100-mig__590.48.01.txt": {
        "idle": "GPU 0 has MIG enabled: only whole GPUs are measured",
        "load": "GPU 0 has MIG enabled: only whole GPUs are measured"},
    "linux-x86_64__nvidia-h200-mig__590.48.01.txt": {
        "idle": "GPU 0 has MIG enabled: only whole GPUs are measured",
        "load": "GPU 0 has MIG enabled: only whole GPUs are measured"},
    "linux-x86_64__nvidia-h200__590.48.01.txt": {
        "idle": None, "load": "GPU 0 busy: gpu_burn pid 10309, 27.6 GiB; 2 more processes on it"},
    # The L40S capture's idle phase reports 100% utilisation with nothing running.
    "linux-x86_64__nvidia-l40s__595.80.txt": {
        "idle": "GPU 0 busy: utilisation 100%", "load": "GPU 0 busy: ffmpeg pid 20038, 681 MiB; 1 more process on it"},
}


def preflight(capture: str, phase: str, monkeypatch: pytest.MonkeyPatch, **env: str) -> Preflight:
    monkeypatch.setenv("FAKE_NVIDIA_SMI_CAPTURE", str(CAPTURES / capture))
    monkeypatch.setenv("FAKE_NVIDIA_SMI_PHASE", phase)
    for name, value in env.items():
        monkeypatch.setenv(f"FAKE_NVIDIA_SMI_{name.upper()}", value)
    return run_preflight(ProbeContext(transport=LocalTransport()))


def test_every_capture_has_an_expectation() -> None:
    assert set(EXPECTED) == {p.name for p in CAPTURES.glob("*.txt")}


@pytest.mark.parametrize("phase", ["idle", "load"])
@pytest.mark.parametrize("capture", sorted(EXPECTED))
def test_refusal_from_the_capture(capture: str, phase: str, fake_smi: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    found = preflight(capture, phase, monkeypatch)
    assert set(found.gpus) == {UUID}
    # The captures' pids are another machine's: this machine's /proc says nothing of them.
    assert refusal(replace(found, cmdlines={})) == EXPECTED[capture][phase]
    said = refusal(found)
    want = EXPECTED[capture][phase]
    if want is None or "pid" not in want:
        assert said == want
    else:  # named by its command line where this machine has that pid, else by nvidia-smi's name
        assert said is not None and said.partition(" pid ")[2] == want.partition(" pid ")[2]


def test_idle_h200_facts_for_the_run(fake_smi: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    found = preflight("linux-x86_64__nvidia-h200__590.48.01.txt", "idle", monkeypatch)
    assert found.driver_version == "590.48.01"
    gpu = found.gpus[UUID]
    assert {k: gpu[k] for k in ("index", "name", "bus_id", "memory_used_mib", "utilization_pct", "mig_mode",
                                "power_limit_w", "pcie_gen_max", "pcie_width_max", "compute_cap")} == {
        "index": 0, "name": "NVIDIA H200", "bus_id": "00000000:83:00.0", "memory_used_mib": 0, "utilization_pct": 0,
        "mig_mode": "Disabled", "power_limit_w": 700.0, "pcie_gen_max": 5, "pcie_width_max": 16, "compute_cap": "9.0"}
    assert found.processes == {}


def test_an_older_driver_without_mig_fields_retries_once(fake_smi: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    found = preflight("linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.txt", "idle", monkeypatch,
                      reject="mig.mode.current,compute_cap")
    assert found.gpus[UUID]["mig_mode"] is None and found.gpus[UUID]["memory_used_mib"] == 0
    assert refusal(found) is None
    queries = [c for c in (fake_smi.parent / "calls.log").read_text().splitlines() if c.startswith("--query-gpu")]
    assert len(queries) == 2


def test_no_nvidia_smi_is_no_gpu_not_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("sh", "head", "tr"):
        (bin_dir / tool).symlink_to(shutil.which(tool) or f"/usr/bin/{tool}")
    monkeypatch.setenv("PATH", str(bin_dir))
    assert run_preflight(ProbeContext(transport=LocalTransport())).missing


def test_a_rejected_core_field_is_an_error(fake_smi: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ProbeError, match="power.limit"):
        preflight("linux-x86_64__nvidia-h200__590.48.01.txt", "idle", monkeypatch, reject="power.limit")


def _gpu(index: int, **values: object) -> dict[str, object]:
    return {"index": index, "name": "NVIDIA H200", "memory_used_mib": 0, "utilization_pct": 0, "mig_mode": "Disabled",
            **values}


def test_the_first_busy_gpu_is_named_with_the_server_and_the_others_counted() -> None:
    gpus = {f"GPU-{i}": _gpu(i) for i in range(8)}
    processes = {f"GPU-{i}:{4400 + i}": {"gpu_uuid": f"GPU-{i}", "pid": 4400 + i, "name": "python3",
                                         "used_mib": 72909} for i in (3, 4, 5)}
    cmdlines = {4403: "python3 -m sglang.launch_server --model-path /models/llama --tp 8"}
    said = refusal(Preflight(gpus=gpus, processes=processes, cmdlines=cmdlines))
    assert said == "GPU 3 busy: sglang pid 4403, 71.2 GiB (and 2 more GPUs busy)"


def test_memory_in_use_by_no_listed_process_refuses() -> None:
    gpus = {"GPU-a": _gpu(0, memory_used_mib=MAX_USED_MIB + 5000)}
    assert refusal(Preflight(gpus=gpus)) == "GPU 0 busy: 5.9 GiB of memory in use by no listed process (another container?)"
    assert refusal(Preflight(gpus={"GPU-a": _gpu(0, memory_used_mib=MAX_USED_MIB)})) is None


def test_utilisation_just_above_five_percent_refuses() -> None:
    assert refusal(Preflight(gpus={"GPU-a": _gpu(0, utilization_pct=6)})) == "GPU 0 busy: utilisation 6%"
    assert refusal(Preflight(gpus={"GPU-a": _gpu(0, utilization_pct=5)})) is None


@pytest.mark.parametrize(("name", "cmdline", "label"), [
    ("python3", "python3 -m sglang.launch_server --port 30000", "sglang"),
    ("/usr/bin/python3.11", "/usr/bin/python3.11 -u /opt/vllm/entrypoints/api.py", "api"),
    ("/opt/venv/bin/python", "/opt/venv/bin/python -m vllm.entrypoints.openai.api_server", "vllm"),
    ("./gpu_burn", "./gpu_burn 60", "gpu_burn"),
    ("/root/tools/memhog", "", "memhog"),  # /proc hides it (another pid namespace)
    ("/root/tools/memhog", None, "memhog"),
    ("python", "python -c 'unbalanced", "python"),
])
def test_process_label(name: str, cmdline: str | None, label: str) -> None:
    assert process_label(name, cmdline) == label
