"""The loaded-stack incidents of issue 12, each made in two states on a real host (this
machine, over the real sshd) and diffed with the CLI: the first change must name the
cause, with its evidence, in one line.

* same version, different build: a server maps nvidia-nccl-cu12 2.28.9's libnccl.so.2;
  the wheel is reinstalled from another build of 2.28.9 and the server restarted
  (vllm-project/vllm #41725: pip's and the OS package's 2.28.9 differed, one hung);
* two wheels, one file: nvidia-nccl-cu13 is installed over nvidia-nccl-cu12 and
  overwrites nvidia/nccl/lib/libnccl.so.2 (marin-community/marin #7344);
* driver layers out of step: the userspace libraries are upgraded under the loaded kernel
  module ("Failed to initialize NVML: Driver/library version mismatch");
* kernel command line changed: iommu=pt dropped from the boot line (NVIDIA/nccl #2079).

The libraries are real ELF files built with known build-ids, the wheels are installed by
pip, the server is a real process that maps the library with ctypes. The driver and boot
line come from an sshd in its own mount namespace whose /proc/driver and /proc/cmdline are
bind-mounted files (tests/mountns.py), as a container's /proc is.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from driftwatch.cli import main
from driftwatch.facts import fmt
from tests.elfs import build_library
from tests.mountns import bind_prefix, need_bind_mounts
from tests.probes.test_processes import Servers
from tests.sshd import Sshd, find_sshd, start_sshd
from tests.venvs import build_wheel, make_gpu_venv, pip_install, site_packages

NCCL = "nvidia/nccl/lib/libnccl.so.2"
BUILD_PIP = "a7f4c0de" + "01" * 16
BUILD_OS = "c0db1e55" + "02" * 16


def config(folder: Path, sshd: Sshd, watch: str) -> None:
    (folder / "driftwatch.toml").write_text(
        f'timeout = 30\nssh_config = "{sshd.ssh_config_path}"\nknown_hosts = "{sshd.known_hosts_path}"\n'
        f"[watch]\n{watch}"
    )


def snapshot_and_diff(
    capsys: pytest.CaptureFixture[str], change: Any, exit_code: int = 0
) -> tuple[list[dict[str, Any]], str]:
    """Snapshot, apply ``change``, snapshot again (exit 3: stored, some probe failed); the
    diff's changes and its first text line."""
    assert main(["snapshot", "testhost", "--label", "good"]) == 0
    change()
    assert main(["snapshot", "testhost"]) == exit_code
    capsys.readouterr()
    assert main(["diff", "testhost@good", "testhost@latest", "--json"]) == 2
    changes = json.loads(capsys.readouterr().out)["changes"]
    assert main(["diff", "testhost@good", "testhost@latest"]) == 2
    out = capsys.readouterr().out; print(out[:3000], file=__import__("sys").stderr); first_line = out.splitlines()[0]
    return changes, first_line


@pytest.fixture
def gpu_host(sshd: Sshd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Servers]]:
    sshd.fake_env()
    python = make_gpu_venv(tmp_path / "venv")
    servers = Servers(tmp_path / "servers")  # stand-in SGLang servers that map what STANDIN_LOAD names
    config(tmp_path, sshd, f'python = ["{python}"]\nprocesses = ["{servers.pattern}"]\n')
    monkeypatch.chdir(tmp_path)
    yield python, servers
    servers.stop()


def size(path: Path) -> str:
    return fmt.size(path.stat().st_size)


def nccl_wheel(folder: Path, name: str, version: str, build_id: str, pad: int) -> Path:
    lib = build_library(folder / f"{name}-{build_id[:8]}" / "libnccl.so.2", build_id, soname="libnccl.so.2", pad=pad)
    return build_wheel(folder / f"{name}-{build_id[:8]}", name, version, {NCCL: lib.read_bytes()})


def test_same_version_different_build_mapped_by_the_server(
    gpu_host: tuple[Path, Servers], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    python, servers = gpu_host
    pip_install(python, nccl_wheel(tmp_path / "w", "nvidia-nccl-cu12", "2.28.9", BUILD_PIP, 200_000), force=True)
    site_lib = site_packages(tmp_path / "venv") / NCCL
    servers.start(env={"STANDIN_LOAD": str(site_lib)})

    def rebuild() -> None:  # the same version, another build, and the server restarted on it
        pip_install(python, nccl_wheel(tmp_path / "w", "nvidia-nccl-cu12", "2.28.9", BUILD_OS, 80_000), force=True)
        servers.stop()
        servers.start(env={"STANDIN_LOAD": str(site_lib)})

    changes, first_line = snapshot_and_diff(capsys, rebuild)
    top = changes[0]
    pip_size, os_size = (size(tmp_path / "w" / f"nvidia-nccl-cu12-{b[:8]}" / "libnccl.so.2") for b in (BUILD_PIP, BUILD_OS))
    assert top["explanation"] == (
        "libnccl.so.2 (mapped by the server sglang.launch_server): same version 2.28.9, different build "
        f"(build-id a7f4c0de… → c0db1e55…, {pip_size} → {os_size})")
    assert (top["category"], top["severity"]) == ("nccl", "high")
    assert "libnccl.so.2" in first_line and "different build" in first_line


def test_two_wheels_one_file(gpu_host: tuple[Path, Servers], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    python, _ = gpu_host
    pip_install(python, nccl_wheel(tmp_path / "w", "nvidia-nccl-cu12", "2.30.7", BUILD_PIP, 0), force=True)
    cu13 = nccl_wheel(tmp_path / "w", "nvidia-nccl-cu13", "2.28.9", BUILD_OS, 4096)
    changes, first_line = snapshot_and_diff(capsys, lambda: pip_install(python, cu13))
    top = changes[0]
    assert top["explanation"].startswith(
        "nvidia/nccl/lib/libnccl.so.2 is installed by nvidia-nccl-cu12 2.30.7 and nvidia-nccl-cu13 2.28.9; the copy "
        "on disk is nvidia-nccl-cu13's: code that loads nvidia-nccl-cu12's copy gets nvidia-nccl-cu13 2.28.9"
        " — known-bad state (observed). Fix: ")
    assert (top["category"], top["severity"]) == ("nccl", "high")
    assert "nvidia-nccl-cu13's" in first_line


@pytest.fixture
def boot_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Path]]:
    """A host whose /proc/driver/nvidia/version and /proc/cmdline are files of the test, with
    the driver's userspace libraries in a directory on the sessions' LD_LIBRARY_PATH."""
    files = {"driver": tmp_path / "proc-driver", "cmdline": tmp_path / "cmdline", "libs": tmp_path / "driver-libs"}
    (files["driver"] / "nvidia").mkdir(parents=True)
    files["libs"].mkdir()
    files["cmdline"].write_text("BOOT_IMAGE=/boot/vmlinuz-6.8.0-60-generic root=UUID=4f1e ro intel_iommu=on iommu=pt\n")
    capture = Path(__file__).parent / "fixtures" / "driver" / "proc-version" / "proprietary-x86_64-580.173.02.txt"
    (files["driver"] / "nvidia" / "version").write_text(capture.read_text())
    install_userspace(files["libs"], "580.173.02")
    binds = {"/proc/cmdline": files["cmdline"], "/proc/driver": files["driver"]}
    need_bind_mounts(binds)
    exe = find_sshd() or pytest.skip("OpenSSH sshd is not installed")
    server = start_sshd(tmp_path / "sshd", exe, prefix=bind_prefix(binds),
                        session_env={"LD_LIBRARY_PATH": str(files["libs"])})
    try:
        server.fake_env()
        config(tmp_path, server, "python = []\nprocesses = []\n")
        monkeypatch.chdir(tmp_path)
        yield {**files, "bin": server.workdir / "bin"}
    finally:
        server.stop()


def install_userspace(folder: Path, version: str) -> None:
    """What the driver package installs: libcuda and libnvidia-ml named by version, each
    with its SONAME link; an older version's files are removed, as the package does."""
    for old in folder.iterdir():
        old.unlink()
    for name in ("libcuda.so", "libnvidia-ml.so"):
        build_library(folder / f"{name}.{version}", "5ca1ab1e", soname=f"{name}.1")
        (folder / f"{name}.1").symlink_to(f"{name}.{version}")


def test_driver_layers_out_of_step(boot_host: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    # zzzhouuu/truenas-nvidia-drivers #19: module 580.173.02 loaded, userspace upgraded to 580.178;
    # nvidia-smi then fails as it did there, and the layers must still be read.
    def upgrade_userspace() -> None:
        install_userspace(boot_host["libs"], "580.178.04")
        smi = boot_host["bin"] / "nvidia-smi"
        smi.write_text("#!/bin/sh\necho 'Failed to initialize NVML: Driver/library version mismatch'\n"
                       "echo 'NVML library version: 580.178'\nexit 18\n")

    changes, first_line = snapshot_and_diff(capsys, upgrade_userspace, exit_code=3)
    top = changes[0]
    assert top["explanation"].startswith(
        "userspace driver 580.178.04 while the loaded kernel module is 580.173.02: new processes will get "
        "'Failed to initialize NVML: Driver/library version mismatch' until a reboot or a reload of the kernel module"
        " — known-bad state (observed). Fix: reboot")
    assert (top["category"], top["severity"]) == ("driver", "critical")
    assert "580.178.04" in first_line and "580.173.02" in first_line
    # nvidia-smi's failure is kept whole in the snapshot and shown below its cause.
    gpu = next(c for c in changes if c["category"] == "probe" and c["item"] == "gpu")
    assert "gpu probe failed: nvidia-smi --query-gpu failed: Failed to initialize NVML" in gpu["explanation"]
    newest = sorted(Path("snapshots").rglob("*.json"))[-1]
    stored = json.loads(newest.read_text())["probes"]["gpu"]["error"]
    assert "Failed to initialize NVML: Driver/library version mismatch / NVML library version: 580.178" in stored


def test_kernel_command_line_changed(boot_host: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    cmdline = boot_host["cmdline"]
    changes, first_line = snapshot_and_diff(
        capsys, lambda: cmdline.write_text(cmdline.read_text().replace(" iommu=pt", "")))
    top = changes[0]
    assert top["explanation"] == (
        "kernel command line iommu: iommu=pt → (not set): IOMMU and ACS settings decide whether GPUs reach each "
        "other peer to peer (NCCL hangs or falls back to slower paths when they cannot)")
    assert (top["category"], top["severity"]) == ("system", "high")
    assert "iommu=pt" in first_line
    assert len([c for c in changes if c["item"].startswith("cmdline")]) == 1
