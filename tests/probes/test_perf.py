"""The perf probe on this machine, for real: the CPU section measured with numpy and with
the standard library, the preflight replayed by the fake nvidia-smi, and the GPU section's
paths that need no GPU (no torch, a CPU-only torch, a torch that hangs or breaks) within
the bound, leaving nothing running."""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import textwrap
import time
import uuid
import zipfile
from pathlib import Path
from typing import Any

import pytest

from driftwatch.collect import run_probe
from driftwatch.facts.figures import VERSION, figures
from driftwatch.model import ProbeStatus
from driftwatch.probes.base import ProbeContext
from driftwatch.probes.perf import PerfProbe
from driftwatch.settings import WatchSettings
from driftwatch.transport.local import LocalTransport

TESTS = Path(__file__).resolve().parents[1]
CAPTURES = TESTS / "fixtures" / "nvidia-smi"
FAKE = TESTS / "fakes" / "nvidia-smi"
H100 = CAPTURES / "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.txt"
SYSTEM_PYTHON = "/usr/bin/python3"


def has_numpy(python: str) -> bool:
    return subprocess.run([python, "-I", "-c", "import numpy"], capture_output=True).returncode == 0


def perf(python: list[str], *, bound: float = 60.0, previous: dict[str, Any] | None = None) -> tuple[Any, float]:
    watch = WatchSettings(python=python, perf=True, perf_timeout=bound)
    ctx = ProbeContext(transport=LocalTransport(), watch=watch, previous=previous or {})
    start = time.monotonic()
    record = run_probe(PerfProbe(), ctx)
    return record, time.monotonic() - start


@pytest.fixture
def no_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A PATH without nvidia-smi (a real one on this machine is hidden)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("sh", "head", "tr"):
        (bin_dir / tool).symlink_to(f"/usr/bin/{tool}" if os.path.exists(f"/usr/bin/{tool}") else f"/bin/{tool}")
    monkeypatch.setenv("PATH", str(bin_dir))


@pytest.fixture
def fake_smi(fake_smi: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The fake nvidia-smi (conftest), replaying an idle H100 unless a test says otherwise."""
    monkeypatch.setenv("FAKE_NVIDIA_SMI_CAPTURE", str(H100))
    monkeypatch.setenv("FAKE_NVIDIA_SMI_PHASE", "idle")
    return fake_smi


def stub_torch(root: Path, init: str) -> str:
    """A real venv whose ``torch`` package is ``init``: what a broken or hung torch does."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    site = Path(glob.glob(str(root / "lib" / "python3*" / "site-packages"))[0])
    (site / "torch").mkdir()
    (site / "torch" / "__init__.py").write_text(textwrap.dedent(init))
    return str(root / "bin" / "python")


def leftovers(marker: str) -> list[str]:
    found = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True)
    return found.stdout.split()


@pytest.mark.skipif(not has_numpy(sys.executable), reason="the test environment has no numpy")
def test_cpu_section_with_numpy_is_a_real_measurement_within_three_seconds(no_gpu: None) -> None:
    record, _ = perf([sys.executable])
    assert record.status is ProbeStatus.ok
    cpu = record.facts["cpu"]
    assert cpu["status"] == "ok" and cpu["backend"] == "numpy" and cpu["threads"] >= 1
    gemm, copy = cpu["figures"]["gemm"], cpu["figures"]["copy"]
    assert gemm["unit"] == "GFLOP/s" and copy["unit"] == "GB/s"
    assert gemm["value"] > 0 and gemm["p10"] <= gemm["value"] <= gemm["p90"] and gemm["n"] >= 3
    assert f"{cpu['threads']} threads" in gemm["method"] and "read + write bytes counted" in copy["method"]
    # The section's own budget is 3 s; the interpreter start and numpy's import come on top.
    assert cpu["duration_s"] < 3.0 + 5.0
    assert record.facts["gpu"] == {"status": "skipped", "reason": "no nvidia-smi on this host"}
    assert record.facts["version"] == VERSION
    assert record.facts["history"]["cpu.gemm"]["values"] == [gemm["value"]]


@pytest.mark.skipif(not os.path.exists(SYSTEM_PYTHON) or has_numpy(SYSTEM_PYTHON), reason="needs a python3 without numpy")
def test_cpu_section_without_numpy_uses_the_standard_library(no_gpu: None) -> None:
    record, _ = perf([SYSTEM_PYTHON])
    cpu = record.facts["cpu"]
    assert cpu["backend"] == "stdlib" and cpu["numpy"] is None and cpu["threads"] == 1
    assert cpu["figures"]["gemm"]["method"] == "pure-Python float matmul 48x48x48, 1 thread"
    assert cpu["figures"]["gemm"]["value"] > 0 and cpu["figures"]["copy"]["value"] > 0


def test_a_figure_below_the_previous_floor_is_measured_again(no_gpu: None) -> None:
    first, _ = perf([SYSTEM_PYTHON])
    previous = dict(first.facts)
    # A history a thousand times faster than this machine: every figure is below its floor now.
    previous["history"] = {key: dict(entry, values=[v * 1000 for v in entry["values"]])
                           for key, entry in first.facts["history"].items()}
    record, _ = perf([SYSTEM_PYTHON], previous=previous)
    for name in ("gemm", "copy"):
        figure = record.facts["cpu"]["figures"][name]
        assert isinstance(figure["remeasured"], float) and figure["remeasured"] > 0
    # A confirmed drop is not accepted into the history.
    assert record.facts["history"]["cpu.gemm"]["values"] == pytest.approx(previous["history"]["cpu.gemm"]["values"])
    assert len(record.facts["history"]["cpu.gemm"]["pending"]) == 1


def test_idle_gpus_without_torch_skip_the_gpu_section(fake_smi: Path) -> None:
    record, _ = perf([SYSTEM_PYTHON])
    gpu = record.facts["gpu"]
    assert gpu["status"] == "skipped"
    assert gpu["reason"] == f"no torch in the configured interpreters (tried: {SYSTEM_PYTHON} (no torch))"
    assert gpu["context"] == {"driver": "590.48.01"}
    assert record.facts["gpus"]["GPU-00000000-0000-0000-0000-000000000000"]["name"] == "NVIDIA H100 80GB HBM3"
    assert not any(k.startswith("gpu.") for k in figures(record.facts))


@pytest.mark.parametrize(("capture", "phase", "reason"), [
    ("linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.txt", "load", "GPU 0 busy: "),
    ("linux-x86_64__nvidia-h200-mig__590.48.01.txt", "idle", "GPU 0 has MIG enabled: only whole GPUs are measured"),
])
def test_busy_or_mig_gpus_are_refused_and_never_touched(
    capture: str, phase: str, reason: str, fake_smi: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    touched = tmp_path / "torch-was-imported"
    python = stub_torch(tmp_path / "venv", f"open({str(touched)!r}, 'w').close()\n")
    monkeypatch.setenv("FAKE_NVIDIA_SMI_CAPTURE", str(CAPTURES / capture))
    monkeypatch.setenv("FAKE_NVIDIA_SMI_PHASE", phase)
    record, _ = perf([python])
    assert record.status is ProbeStatus.ok and record.facts["gpu"]["status"] == "refused"
    assert record.facts["gpu"]["reason"].startswith(reason)
    assert record.facts["cpu"]["status"] == "ok"  # the CPU section still runs
    assert not touched.exists()


def test_a_torch_that_fails_to_import_is_an_error_with_its_words(fake_smi: Path, tmp_path: Path) -> None:
    python = stub_torch(tmp_path / "venv", 'raise RuntimeError("libcudart.so.12: cannot open shared object file")\n')
    record, _ = perf([python])
    gpu = record.facts["gpu"]
    assert gpu["status"] == "error" and gpu["python"] == python
    assert gpu["reason"].startswith("torch failed to start: ")
    assert "RuntimeError: libcudart.so.12: cannot open shared object file" in gpu["reason"]


@pytest.mark.skipif(not os.path.exists("/usr/bin/pgrep") and not os.path.exists("/bin/pgrep"), reason="needs pgrep")
def test_a_hung_torch_is_cut_at_the_bound_and_nothing_it_started_survives(fake_smi: Path, tmp_path: Path) -> None:
    marker = f"driftwatch-perf-hang-{uuid.uuid4().hex}"
    # torch's import hangs, and leaves a grandchild that ignores SIGTERM in a process group of
    # its own (as a compile worker or a wedged helper can).
    python = stub_torch(tmp_path / "venv", f"""
        import os, signal, subprocess, sys, time
        subprocess.Popen([sys.executable, "-c",
                          "import os, signal, time; os.setpgid(0, 0); signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                          "time.sleep(600)  # {marker}"])
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(600)  # {marker}
    """)
    record, elapsed = perf([python], bound=20.0)
    gpu = record.facts["gpu"]
    assert gpu["status"] == "timeout" and gpu["reason"] == "torch did not start in time (import torch, CUDA init)"
    assert record.facts["cpu"]["status"] == "ok"
    assert elapsed < 20.0
    time.sleep(0.5)
    assert leftovers(marker) == []


def _cpu_torch_wheel() -> str | None:
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    found = sorted(glob.glob(f"/opt/wheels/torch-*+cpu-{tag}-{tag}-*.whl"))
    return found[-1] if found else None


@pytest.fixture(scope="session")
def cpu_torch(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A venv with the real CPU-only torch this machine keeps on disk, unpacked once into
    pytest's cache (700 MB: kept between runs of this checkout; a temporary folder when the
    cache is off)."""
    wheel = _cpu_torch_wheel()
    if wheel is None:
        pytest.skip("no CPU torch wheel for this Python in /opt/wheels")
    name = "cpu-torch-" + Path(wheel).stem.split("-")[1]
    cache = getattr(request.config, "cache", None)
    root = cache.mkdir(name) if cache is not None else tmp_path_factory.mktemp(name)
    python = root / "bin" / "python"
    done = root / ".unpacked"
    if not done.exists():
        subprocess.run([sys.executable, "-m", "venv", "--clear", "--without-pip", str(root)], check=True)
        site = Path(glob.glob(str(root / "lib" / "python3*" / "site-packages"))[0])
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(site)
        import typing_extensions  # torch's one import-time dependency; pydantic brings it here

        (site / "typing_extensions.py").write_text(Path(typing_extensions.__file__).read_text())
        done.touch()
    return str(python)


def test_a_torch_built_without_cuda_skips_the_gpu_section(fake_smi: Path, cpu_torch: str) -> None:
    record, elapsed = perf([cpu_torch])
    gpu = record.facts["gpu"]
    assert gpu["status"] == "skipped" and gpu["python"] == cpu_torch
    assert gpu["reason"].startswith("torch 2.") and gpu["reason"].endswith("+cpu was built without CUDA")
    assert gpu["context"]["torch"].endswith("+cpu") and gpu["context"]["cuda"] is None
    assert gpu["context"]["driver"] == "590.48.01"
    assert elapsed < 60.0


def test_not_asked_for_is_skipped() -> None:
    ctx = ProbeContext(transport=LocalTransport(), watch=WatchSettings())
    record = run_probe(PerfProbe(), ctx)
    assert record.status is ProbeStatus.skipped and "--perf" in (record.error or "")


def test_without_perf_a_snapshot_imports_nothing_of_it(tmp_path: Path, no_gpu: None) -> None:
    """--perf off costs nothing: the probe's modules are not even loaded."""
    code = ("import sys; from driftwatch.cli import main; main(['snapshot', 'local', '--store', sys.argv[1]]); "
            "open(sys.argv[2], 'w').write(' '.join(m for m in sys.modules if 'perf' in m))")
    loaded = tmp_path / "modules"
    subprocess.run([sys.executable, "-c", code, str(tmp_path / "store"), str(loaded)], check=True, capture_output=True,
                   env={**os.environ, "PATH": os.environ["PATH"] + os.pathsep + "/usr/bin:/bin"})
    assert "driftwatch.probes.perf" not in loaded.read_text().split()
