"""The cuda probe against a real venv and fake system tools, and its parsers."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from driftwatch.collect import collect_snapshot, run_probe
from driftwatch.config import Target
from driftwatch.model import ProbeStatus
from driftwatch.probes.base import ProbeContext
from driftwatch.probes.cuda import (
    CudaProbe,
    nccl_version_from_path,
    parse_cuda_report,
    parse_ldconfig_nccl,
    parse_nccl_libraries,
    parse_nvcc_version,
    parse_torch_version_py,
    split_sections,
)
from driftwatch.probes.python import REPORT_MARKER, PythonProbe
from driftwatch.settings import WatchSettings
from driftwatch.transport.local import LocalTransport
from tests.venvs import TORCH_GIT_VERSION, TORCH_VERSION_PY, make_gpu_venv, old_pythons, site_packages

# Real `nvcc --version` of CUDA 12.8 update 1.
NVCC_12_8 = """\
nvcc: NVIDIA (R) Cuda compiler driver
Copyright (c) 2005-2025 NVIDIA Corporation
Built on Fri_Feb_21_20:23:50_PST_2025
Cuda compilation tools, release 12.8, V12.8.93
Build cuda_12.8.r12.8/compiler.35583870_0
"""

# What `ldconfig -p` prints on an Ubuntu host with the libnccl2 package installed.
LDCONFIG = """\
1187 libs found in cache `/etc/ld.so.cache'
\tlibnccl.so.2 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libnccl.so.2
\tlibnccl.so (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libnccl.so
\tlibnccl-net.so (libc6,x86-64) => /opt/amazon/ofi-nccl/lib/libnccl-net.so
\tlibncurses.so.6 (libc6,x86-64) => /lib/x86_64-linux-gnu/libncurses.so.6
"""

# Real torch 1.13 file: plain assignments, no annotations.
TORCH_1_13_VERSION_PY = """\
__version__ = '1.13.1+cu117'
debug = False
cuda = '11.7'
git_version = '49444c3e546bf240bed24a101e747422d1f8a0ee'
hip = None
"""


@pytest.fixture(scope="session")
def gpu_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_gpu_venv(tmp_path_factory.mktemp("gpu") / "venv")


@pytest.fixture
def no_nvcc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A PATH with the usual tools but no nvcc, and a CUDA_HOME without one; returns a
    directory that is first on that PATH, for fakes."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    path = f"{bin_dir}:/usr/bin:/bin"
    if shutil.which("nvcc", path="/usr/bin:/bin"):
        pytest.skip("this host has nvcc in /usr/bin")
    monkeypatch.setenv("PATH", path)
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "no-cuda"))
    return bin_dir


def collect(*interpreters: str) -> dict[str, Any]:
    ctx = ProbeContext(transport=LocalTransport(), watch=WatchSettings(python=list(interpreters)), timeout=20)
    return CudaProbe().collect(ctx)


def test_python_and_cuda_probes_start_each_interpreter_once(gpu_venv: Path, tmp_path: Path) -> None:
    # A snapshot's python and cuda probes share one run of each interpreter: on a GPU host
    # every start of a venv's python costs ~25 ms of the host's CPU.
    starts = tmp_path / "starts"
    wrapper = tmp_path / "python3"
    wrapper.write_text(f'#!/bin/sh\necho started >> "{starts}"\nexec "{gpu_venv}" "$@"\n')
    wrapper.chmod(0o755)
    target = Target(name="local", address="local", watch=WatchSettings(python=[str(wrapper)]))
    probes = {"python": PythonProbe(), "cuda": CudaProbe()}
    snap = collect_snapshot(target, LocalTransport(), probes, timeout=20)
    assert starts.read_text().splitlines() == ["started"]
    assert snap.probes["python"].facts["interpreters"][str(wrapper)]["distributions"]["torch"]["version"] == "2.8.0+cu128"
    assert snap.probes["cuda"].facts["torch"][str(wrapper)]["cuda"] == "12.8"
    assert snap.probes["cuda"].facts["nccl"]["distributions"] == {"nvidia-nccl-cu12": "2.27.3"}


def test_wheels_and_torch_build_from_the_venv(gpu_venv: Path) -> None:
    facts = collect(str(gpu_venv))
    assert facts["nccl"]["distributions"] == {"nvidia-nccl-cu12": "2.27.3"}
    assert facts["cudnn"] == {"nvidia-cudnn-cu12": "9.10.2.21"}
    site = site_packages(gpu_venv.parent.parent)
    assert facts["torch"] == {
        str(gpu_venv): {
            "version": "2.8.0+cu128",
            "cuda": "12.8",
            "git_version": TORCH_GIT_VERSION,
            "path": str(site / "torch" / "version.py"),
        }
    }


def test_torch_is_read_without_import(gpu_venv: Path) -> None:
    # torch/__init__.py raises; reading version.py must not run it.
    broken = subprocess.run([str(gpu_venv), "-c", "import torch"], check=False, capture_output=True, text=True)
    assert broken.returncode != 0
    assert collect(str(gpu_venv))["torch"][str(gpu_venv)]["version"] == "2.8.0+cu128"


def test_interpreter_without_torch_has_no_torch_entry(tmp_path: Path) -> None:
    python = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(python)], check=True)
    facts = collect(str(python / "bin" / "python"))
    assert facts["torch"] == {}
    assert facts["nccl"]["distributions"] == {} and facts["cudnn"] == {}


def test_missing_interpreter_is_marked_and_the_probe_succeeds(gpu_venv: Path, tmp_path: Path) -> None:
    missing = str(tmp_path / "nope" / "python3")
    facts = collect(str(gpu_venv), missing)
    assert "not found" in facts["torch"][missing]["error"]
    assert facts["torch"][str(gpu_venv)]["version"] == "2.8.0+cu128"
    assert facts["nccl"]["distributions"] == {"nvidia-nccl-cu12": "2.27.3"}


def slow_python(tmp_path: Path, real: Path, seconds: float) -> str:
    """An interpreter that answers after ``seconds``: a hung NFS site-packages."""
    wrapper = tmp_path / "slow-python3"
    wrapper.write_text(f'#!/bin/sh\nsleep {seconds}\nexec "{real}" "$@"\n')
    wrapper.chmod(0o755)
    return str(wrapper)


@pytest.mark.parametrize("why", ["missing", "slower than the deadline"])
def test_no_readable_interpreter_fails_the_probe_never_absent_wheels(gpu_venv: Path, tmp_path: Path, why: str) -> None:
    # Today's failure: status ok with NCCL and cuDNN "absent", which check then alerted as
    # "NCCL 2.27.3 → absent". An unread interpreter is unknown, not empty.
    python = str(tmp_path / "nope" / "python3") if why == "missing" else slow_python(tmp_path, gpu_venv, 5)
    ctx = ProbeContext(transport=LocalTransport(), watch=WatchSettings(python=[python]), timeout=1)
    record = run_probe(CudaProbe(), ctx)
    assert record.status is (ProbeStatus.error if why == "missing" else ProbeStatus.timeout)
    assert record.facts == {} and python in (record.error or "")


def test_nvcc_absent_is_null(gpu_venv: Path, no_nvcc: Path) -> None:
    facts = collect(str(gpu_venv))
    assert facts["toolkit"]["nvcc"] is None
    expected_link = os.path.realpath("/usr/local/cuda") if os.path.exists("/usr/local/cuda") else None
    assert facts["toolkit"]["cuda_link"] == expected_link


def test_nvcc_on_path_is_parsed(gpu_venv: Path, no_nvcc: Path) -> None:
    fake = no_nvcc / "nvcc"
    fake.write_text(f"#!/bin/sh\n[ \"$1\" = --version ] || exit 1\ncat <<'EOF'\n{NVCC_12_8}EOF\n")
    fake.chmod(0o755)
    assert collect(str(gpu_venv))["toolkit"]["nvcc"] == "12.8.93"


def test_nvcc_from_cuda_home_when_not_on_path(
    gpu_venv: Path, no_nvcc: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cuda_bin = tmp_path / "cuda-12.8" / "bin"
    cuda_bin.mkdir(parents=True)
    (cuda_bin / "nvcc").write_text(f"#!/bin/sh\ncat <<'EOF'\n{NVCC_12_8}EOF\n")
    (cuda_bin / "nvcc").chmod(0o755)
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda-12.8"))
    assert collect(str(gpu_venv))["toolkit"]["nvcc"] == "12.8.93"


def test_system_nccl_found_through_ld_library_path(
    gpu_venv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lib = tmp_path / "nccl" / "lib"
    lib.mkdir(parents=True)
    (lib / "libnccl.so.2.21.5").write_bytes(b"\x7fELF")
    (lib / "libnccl.so.2").symlink_to("libnccl.so.2.21.5")
    (lib / "libnccl.so").symlink_to("libnccl.so.2")
    monkeypatch.setenv("LD_LIBRARY_PATH", f"/nonexistent:{lib}")
    system = collect(str(gpu_venv))["nccl"]["system"]
    # Three names, one library: keyed by the real file.
    assert system[str(lib / "libnccl.so.2.21.5")] == "2.21.5"
    assert not any(path.startswith(str(lib)) and path != str(lib / "libnccl.so.2.21.5") for path in system)


def test_system_nccl_from_ldconfig_outside_the_usual_dirs(gpu_venv: Path, no_nvcc: Path, tmp_path: Path) -> None:
    lib = tmp_path / "opt" / "nccl-2.19" / "lib"
    lib.mkdir(parents=True)
    (lib / "libnccl.so.2.19.3").write_bytes(b"\x7fELF")
    (lib / "libnccl.so.2").symlink_to("libnccl.so.2.19.3")
    ldconfig = no_nvcc / "ldconfig"
    ldconfig.write_text(
        "#!/bin/sh\n"
        "printf '2 libs found in cache `/etc/ld.so.cache'\\''\\n'\n"
        f"printf '\\tlibnccl.so.2 (libc6,x86-64) => {lib}/libnccl.so.2\\n'\n"
        "printf '\\tlibc.so.6 (libc6,x86-64) => /lib/x86_64-linux-gnu/libc.so.6\\n'\n"
    )
    ldconfig.chmod(0o755)
    system = collect(str(gpu_venv))["nccl"]["system"]
    assert system[str(lib / "libnccl.so.2.19.3")] == "2.19.3"
    assert str(lib / "libnccl.so.2") not in system


def test_record_is_ok_and_json(gpu_venv: Path) -> None:
    ctx = ProbeContext(transport=LocalTransport(), watch=WatchSettings(python=[str(gpu_venv)]), timeout=20)
    record = run_probe(CudaProbe(), ctx)
    assert record.status is ProbeStatus.ok
    assert set(record.facts) == {"nccl", "torch", "toolkit", "cudnn"}
    assert set(record.facts["nccl"]) == {"distributions", "system"}
    assert set(record.facts["toolkit"]) == {"nvcc", "cuda_link"}


# --- parsers ----------------------------------------------------------------------


def test_parse_nvcc_version() -> None:
    assert parse_nvcc_version(NVCC_12_8) == "12.8.93"
    assert parse_nvcc_version("Cuda compilation tools, release 11.8, V11.8.89\n") == "11.8.89"
    assert parse_nvcc_version("Cuda compilation tools, release 10.0\n") == "10.0"
    assert parse_nvcc_version("") is None
    assert parse_nvcc_version("sh: 1: nvcc: not found\n") is None


def test_parse_torch_version_py_2_8() -> None:
    assert parse_torch_version_py(TORCH_VERSION_PY) == {
        "version": "2.8.0+cu128",
        "cuda": "12.8",
        "git_version": TORCH_GIT_VERSION,
    }


def test_parse_torch_version_py_old_and_rocm_and_broken() -> None:
    assert parse_torch_version_py(TORCH_1_13_VERSION_PY) == {
        "version": "1.13.1+cu117",
        "cuda": "11.7",
        "git_version": "49444c3e546bf240bed24a101e747422d1f8a0ee",
    }
    rocm = TORCH_VERSION_PY.replace("cuda: Optional[str] = '12.8'", "cuda: Optional[str] = None")
    assert parse_torch_version_py(rocm)["cuda"] is None
    # Never evaluated: a call is not a literal and yields null.
    assert parse_torch_version_py("__version__ = open('/etc/passwd').read()\n")["version"] is None
    assert parse_torch_version_py("__version__ = '2.8.0\n") == {"version": None, "cuda": None, "git_version": None}


def test_parse_ldconfig_nccl() -> None:
    assert parse_ldconfig_nccl(LDCONFIG) == [
        "/usr/lib/x86_64-linux-gnu/libnccl.so.2",
        "/usr/lib/x86_64-linux-gnu/libnccl.so",
    ]
    assert parse_ldconfig_nccl("0 libs found in cache `/etc/ld.so.cache'\n") == []


def test_nccl_version_from_path() -> None:
    assert nccl_version_from_path("/usr/lib/x86_64-linux-gnu/libnccl.so.2.21.5") == "2.21.5"
    assert nccl_version_from_path("/usr/lib/x86_64-linux-gnu/libnccl.so.2") == "2"
    assert nccl_version_from_path("/usr/lib/x86_64-linux-gnu/libnccl.so") is None
    assert nccl_version_from_path("/opt/libnccl-net.so") is None


def test_parse_nccl_libraries_keys_real_files() -> None:
    libs = (
        "/usr/lib/x86_64-linux-gnu/libnccl.so\t/usr/lib/x86_64-linux-gnu/libnccl.so.2.21.5\n"
        "/usr/lib/x86_64-linux-gnu/libnccl.so.2\t/usr/lib/x86_64-linux-gnu/libnccl.so.2.21.5\n"
        "/usr/lib/x86_64-linux-gnu/libnccl.so.2.21.5\t/usr/lib/x86_64-linux-gnu/libnccl.so.2.21.5\n"
        "/usr/local/cuda/lib64/libnccl.so.2\t/usr/local/cuda-12.8/lib64/libnccl.so.2.27.3\n"
    )
    assert parse_nccl_libraries(LDCONFIG, libs) == {
        "/usr/lib/x86_64-linux-gnu/libnccl.so.2.21.5": "2.21.5",
        "/usr/local/cuda-12.8/lib64/libnccl.so.2.27.3": "2.27.3",
    }
    # ldconfig knows a library the target did not resolve: kept as ldconfig named it.
    assert parse_nccl_libraries(LDCONFIG, "") == {
        "/usr/lib/x86_64-linux-gnu/libnccl.so": None,
        "/usr/lib/x86_64-linux-gnu/libnccl.so.2": "2",
    }
    assert parse_nccl_libraries("", "") == {}


def test_split_sections() -> None:
    text = "@@ldconfig\n\tlibnccl.so.2 => /x\n@@libs\n@@nvcc\n" + NVCC_12_8 + "@@cuda_link\n/usr/local/cuda-12.8\n"
    sections = split_sections(text)
    assert sections["libs"] == ""
    assert parse_nvcc_version(sections["nvcc"]) == "12.8.93"
    assert sections["cuda_link"] == "/usr/local/cuda-12.8"


def test_parse_cuda_report() -> None:
    report = {
        "distributions": {
            "nvidia-nccl-cu12": {"name": "nvidia-nccl-cu12", "version": "2.27.3"},
            "nvidia-cudnn-cu12": {"name": "nvidia-cudnn-cu12", "version": "9.10.2.21"},
            "nvidia-cublas-cu12": {"name": "nvidia-cublas-cu12", "version": "12.8.4.1"},
            "torch": {"name": "torch", "version": "2.8.0+cu128"},
        },
        "torch": {"path": "/venv/torch/version.py", "text": TORCH_VERSION_PY},
    }
    parsed = parse_cuda_report("noise\n" + REPORT_MARKER + json.dumps(report) + "\n")
    assert parsed["distributions"] == {"nvidia-nccl-cu12": "2.27.3", "nvidia-cudnn-cu12": "9.10.2.21"}
    assert parsed["torch"] == {
        "version": "2.8.0+cu128",
        "cuda": "12.8",
        "git_version": TORCH_GIT_VERSION,
        "path": "/venv/torch/version.py",
    }
    assert parse_cuda_report(REPORT_MARKER + '{"distributions": {}, "torch": null}')["torch"] is None


@pytest.mark.parametrize(
    "python", old_pythons() or [pytest.param(None, marks=pytest.mark.skip("no python3.8/3.9 here"))]
)
def test_collector_runs_on_old_pythons(python: str) -> None:
    facts = collect(python)
    assert "error" not in facts["torch"].get(python, {})
