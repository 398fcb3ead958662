"""`driftwatch doctor` end to end over the real sshd: a host made broken one way at a time.

The host is the test machine reached over SSH, with a real venv (tests/venvs.py) and the
fake nvidia-smi replaying a real capture (tests/sshd.py). Each scenario breaks one thing
the way it breaks on a GPU host; doctor must name it, with its fix; a healthy host gives
exit 0 and no finding.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from driftwatch.cli import main
from tests.sshd import Sshd, find_sshd, start_sshd
from tests.test_cli_check import gauges
from tests.venvs import TORCH_GIT_VERSION, make_gpu_venv, site_packages, write_dist_info

H200_CUDA_13_1 = Path(__file__).parent / "fixtures" / "nvidia-smi" / "linux-x86_64__nvidia-h200__590.48.01.txt"
# What the test venv's distributions require and it does not install (a real pip install
# would have pulled them in): with them, `pip check` has nothing to say.
COMPLETION = {
    "filelock": "3.16.1", "typing-extensions": "4.12.2", "sympy": "1.13.3", "networkx": "3.4.2", "jinja2": "3.1.4",
    "fsspec": "2024.10.0", "triton": "3.4.0", "nvidia-cublas-cu12": "12.8.4.1", "ninja": "1.11.1.1",
    "numpy": "2.1.3", "nvidia-cudnn-frontend": "1.13.0", "requests": "2.32.3", "tabulate": "0.9.0",
    "tqdm": "4.67.1", "aiohttp": "3.11.9",
}


def healthy_host(server: Sshd, root: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The H200 capture behind ``server``, a complete GPU venv, and a config for testhost."""
    server.fake_env(FAKE_NVIDIA_SMI_CAPTURE=str(H200_CUDA_13_1))
    venv = root / "venv"
    python = make_gpu_venv(venv)
    for name, version in COMPLETION.items():
        disk = name.replace("-", "_")
        write_dist_info(site_packages(venv), disk, name, version, [], {f"{disk}/__init__.py": ""})
    (root / "driftwatch.toml").write_text(
        f'timeout = 30\nconnect_timeout = 5\nssh_config = "{server.ssh_config_path}"\n'
        f'known_hosts = "{server.known_hosts_path}"\n[watch]\npython = ["{python}"]\n'
    )
    monkeypatch.chdir(root)
    return venv


@pytest.fixture
def venv(sshd: Sshd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return healthy_host(sshd, tmp_path, monkeypatch)


def doctor(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["doctor", *args])
    return code, capsys.readouterr().out


def reports(out: str) -> dict[str, dict]:
    return {entry["host"]: entry for entry in json.loads(out)}


def test_a_healthy_host_has_nothing_to_report(venv: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = doctor(capsys, "testhost", "--json")
    [report] = json.loads(out)
    assert code == 0 and report["findings"] == [] and report["exit_code"] == 0
    assert report["source"].startswith("snapshot taken now, stored as ")  # nothing collected is lost
    # The rules that lacked their facts say why (no server runs here, no log is watched).
    reasons = {n["rule"]: n["why"] for n in report["not_run"]}
    assert reasons["kv-budget-sglang"] == "no sglang server log was read"
    code, out = doctor(capsys, "testhost")
    assert code == 0 and out.startswith("testhost: no known-bad state")


def test_a_host_not_wholly_read_is_never_called_clean(
    sshd: Sshd, venv: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A hung nvidia-smi hides every GPU rule: doctor names the probe that was not read and
    exits 1, never "no known-bad state" with exit 0 (it said exactly that before)."""
    sshd.fake_env(FAKE_NVIDIA_SMI_CAPTURE=str(H200_CUDA_13_1), FAKE_NVIDIA_SMI_HANG="1")
    code, out = doctor(capsys, "testhost", "--timeout", "3")
    assert code == 1
    lines = out.splitlines()
    assert lines[0] == "testhost: no known-bad state in what could be read; 1 probe not read"
    assert any(line.strip().startswith("not read: gpu probe (timeout:") for line in lines)
    code, out = doctor(capsys, "testhost@latest", "--json")  # the stored snapshot says the same
    [report] = json.loads(out)
    assert code == 1 and report["exit_code"] == 1 and list(report["unread"]) == ["gpu"]
    assert report["unread"]["gpu"].startswith("timeout: ")


def set_sgl_kernel(venv: Path, version: str) -> None:
    site = site_packages(venv)
    shutil.rmtree(next(site.glob("sgl_kernel-*.dist-info")))
    write_dist_info(site, "sgl_kernel", "sgl-kernel", version, [], {"sgl_kernel/__init__.py": f"# {version}\n"})


def test_an_unmet_sgl_kernel_pin_is_named_with_its_fix(venv: Path, capsys: pytest.CaptureFixture[str]) -> None:
    set_sgl_kernel(venv, "0.3.17")
    code, out = doctor(capsys, "testhost")
    assert code == 2
    assert "sglang 0.5.6 requires sgl-kernel==0.3.16.post4 (extra [srt]), but 0.3.17 is installed" in out
    assert "fix: pip install 'sgl-kernel==0.3.16.post4' (what sglang 0.5.6 requires)" in out
    # The stored snapshot says the same, and Markdown too.
    code, markdown = doctor(capsys, "testhost@latest", "--markdown")
    assert code == 2 and "| high | unmet-requirement | predicted | sglang 0.5.6 requires sgl-kernel==0.3.16.post4" in markdown


def use_torch_for_cuda(venv: Path, cuda: str) -> None:
    site = site_packages(venv)
    tag = "cu" + cuda.replace(".", "")
    version = f"2.10.0+{tag}"
    shutil.rmtree(next(site.glob("torch-*.dist-info")))
    write_dist_info(site, "torch", "torch", version, [], {"torch/__init__.py": "raise RuntimeError('never imported')\n"})
    (site / "torch" / "version.py").write_text(
        f"__version__ = '{version}'\ndebug = False\ncuda = '{cuda}'\ngit_version = '{TORCH_GIT_VERSION}'\n"
    )


def test_a_driver_older_than_torchs_cuda_is_named_with_its_fix(venv: Path, capsys: pytest.CaptureFixture[str]) -> None:
    use_torch_for_cuda(venv, "13.2")  # the H200 capture's driver 590.48.01 supports CUDA 13.1
    code, out = doctor(capsys, "testhost", "--json")
    [report] = json.loads(out)
    [finding] = [f for f in report["findings"] if f["rule"] == "driver-below-cuda-build"]
    assert code == 2 and finding["severity"] == "high" and finding["evidence"] == "predicted"
    assert finding["why"].startswith("the driver 590.48.01 supports CUDA 13.1, but torch 2.10.0+cu132 (CUDA 13.2)")
    assert finding["fix"].startswith("upgrade the NVIDIA driver to one for CUDA 13.2 or newer")
    assert finding["reference"] == "https://docs.nvidia.com/deploy/cuda-compatibility/"


def test_one_report_per_host_and_an_unreachable_one_is_an_error(venv: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["snapshot", "testhost", "--label", "good"]) == 0
    set_sgl_kernel(venv, "0.3.17")
    code, out = doctor(capsys, "testhost@good", "testhost", "nobody@127.0.0.1:1", "--json")
    found = json.loads(out)
    assert code == 1 and [r["exit_code"] for r in found] == [0, 2, 1]
    assert found[0]["source"].startswith("stored snapshot ") and "error" in found[2]


def doctor_gauges(prom: Path) -> dict[str, float]:
    return gauges(prom, "driftwatch_doctor_findings")


def test_check_says_which_change_made_the_known_bad_state(venv: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["snapshot", "testhost", "--label", "good"]) == 0
    prom = tmp_path / "textfile"
    assert main(["check", "testhost", "--textfile", str(prom)]) == 0
    assert doctor_gauges(prom) == {"critical": 0, "high": 0, "medium": 0, "low": 0, "info": 0}
    set_sgl_kernel(venv, "0.3.17")
    capsys.readouterr()
    assert main(["check", "testhost", "--json", "--textfile", str(prom)]) == 2
    [entry] = json.loads(capsys.readouterr().out)
    first = entry["changes"][0]
    assert first["item"] == "sgl-kernel" and "known-bad state (predicted): sglang 0.5.6 requires" in first["explanation"]
    assert [k["rule"] for k in entry["known_bad"]] == ["unmet-requirement"]
    assert doctor_gauges(prom)["high"] == 1


# The loaded-stack scenarios need the libraries and caches probes (the libs and caches
# branches): until those are in this tree the tests skip, saying so; then they run.


def test_two_nccl_wheels_owning_one_file_name_the_copy_that_loads(venv: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = doctor(capsys, "testhost")
    assert code == 0, out
    write_dist_info(site_packages(venv), "nvidia_nccl_cu13", "nvidia-nccl-cu13", "2.28.9", [],
                    {"nvidia/nccl/__init__.py": "", "nvidia/nccl/lib/libnccl.so.2": "\x7fELF-cu13-build\n"})
    code, out = doctor(capsys, "testhost")
    assert code == 2
    assert ("file-two-owners [observed] nvidia/nccl/lib/libnccl.so.2 is installed by nvidia-nccl-cu12 2.27.3 and "
            "nvidia-nccl-cu13 2.28.9: the copy on disk is nvidia-nccl-cu13's, so nvidia-nccl-cu13 2.28.9 is what loads") in out
    assert "fix: pip uninstall nvidia-nccl-cu12 (it deletes this file too), then pip install --force-reinstall" in out


@pytest.fixture
def private_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Path]]:
    """(venv, HOME): an sshd of its own whose sessions have a private HOME, so the caches sit
    at their default places without touching this machine's."""
    exe = find_sshd()
    if exe is None:
        pytest.skip("OpenSSH sshd is not installed")
    home = tmp_path / "home"
    home.mkdir()
    server = start_sshd(tmp_path / "sshd", exe, session_env={"HOME": str(home)})
    try:
        yield healthy_host(server, tmp_path, monkeypatch), home
    finally:
        server.stop()


def jit_build(home: Path, version: str, built: float) -> Path:
    """A FlashInfer JIT op as it leaves ~/.cache/flashinfer/<version>: objects and the module."""
    build = home / ".cache" / "flashinfer" / version / "121a" / "cached_ops" / "fused_moe_120"
    build.mkdir(parents=True)
    for i in range(8):
        (build / f"moe_kernel_{i}.cuda.o").write_bytes(b"o" * (1000 + i))
    (build / "fused_moe_120.so").write_bytes(b"so" * 4000)
    for path in build.iterdir():
        os.utime(path, (built, built))
    return build


def test_a_stale_flashinfer_cache_after_a_same_version_reinstall(
    private_home: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    venv, home = private_home
    site = site_packages(venv)
    dist_info = next(site.glob("flashinfer_python-*.dist-info"))
    os.utime(dist_info, (time.time() - 3600, time.time() - 3600))  # installed an hour ago
    jit_build(home, "0.4.1", time.time() - 600)  # its kernels JIT-compiled since
    code, out = doctor(capsys, "testhost")
    assert code == 0, out
    shutil.rmtree(dist_info)  # the same version reinstalled (a rebuilt wheel): now
    write_dist_info(site, "flashinfer_python", "flashinfer-python", "0.4.1", [], {"flashinfer/__init__.py": "# rebuilt\n"})
    code, out = doctor(capsys, "testhost")
    cache = home / ".cache" / "flashinfer" / "0.4.1"
    assert code == 2 and f"stale-compile-cache [predicted] {cache}: 9 of 9 compiled objects predate the install" in out
    assert f"fix: rm -rf {cache} (it is rebuilt on next use)" in out
