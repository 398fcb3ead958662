"""What the process resolves, made on a real host over sshd and diffed with the CLI.

* a system CUDA toolkit's older libnvJitLink first on LD_LIBRARY_PATH shadows the wheel's:
  libcusparse.so.12 from nvidia-cusparse-cu12 finds /usr/local/cuda-12.1/lib64's copy
  before its own RUNPATH, and `import torch` fails with `undefined symbol:
  __nvJitLinkComplete_12_4, version libnvJitLink.so.12` (pytorch #140797, PR #141063);
* a torch installed with pip --user long ago shadows the venv's once the venv is recreated
  with --system-site-packages: site.py puts the user site before the venv's site-packages.

The libraries are real ELF files compiled with their SONAMEs, DT_NEEDED and RUNPATH as the
nvidia wheels ship them, installed by pip from real wheels; the LD_LIBRARY_PATH comes from
the session user's ~/.profile, read by the real login shell.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from driftwatch.cli import main
from tests.elfs import build_library
from tests.probes.test_processes import Servers
from tests.sshd import Sshd
from tests.test_stack_incidents import gpu_host, snapshot_and_diff  # noqa: F401  (gpu_host is a fixture)
from tests.venvs import build_wheel, pip_install, site_packages, write_dist_info

JITLINK = "nvidia/nvjitlink/lib/libnvJitLink.so.12"
CUSPARSE = "nvidia/cusparse/lib/libcusparse.so.12"


def cuda_wheels(folder: Path) -> list[Path]:
    """nvidia-nvjitlink-cu12 12.4.127 and nvidia-cusparse-cu12 12.3.1.170, whose
    libcusparse.so.12 needs libnvJitLink.so.12 through RUNPATH $ORIGIN/../../nvjitlink/lib."""
    jit = build_library(folder / "jit" / JITLINK, "4e7a12a4" + "01" * 16, soname="libnvJitLink.so.12", pad=64_000)
    sparse = build_library(folder / "sparse" / CUSPARSE, "c5a85e12" + "02" * 16, soname="libcusparse.so.12",
                           link=[jit], runpath="$ORIGIN/../../nvjitlink/lib")
    return [build_wheel(folder / "w1", "nvidia-nvjitlink-cu12", "12.4.127", {JITLINK: jit.read_bytes()}),
            build_wheel(folder / "w2", "nvidia-cusparse-cu12", "12.3.1.170", {CUSPARSE: sparse.read_bytes()})]


def toolkit(root: Path) -> Path:
    """/usr/local/cuda-12.1/lib64 as the CUDA 12.1 toolkit installs libnvJitLink: the file named
    by its version and the SONAME link."""
    lib64 = root / "cuda-12.1" / "lib64"
    build_library(lib64 / "libnvJitLink.so.12.1.105", "12112105" + "03" * 16, soname="libnvJitLink.so.12")
    (lib64 / "libnvJitLink.so.12").symlink_to("libnvJitLink.so.12.1.105")
    return lib64


@pytest.fixture
def profile(sshd: Sshd) -> Iterator[Path]:
    """The session user's ~/.profile on the shared sshd, given back as it was."""
    path = sshd.workdir / "home" / ".profile"
    before = path.read_text()
    try:
        yield path
    finally:
        path.write_text(before)


def test_system_toolkit_nvjitlink_first_on_ld_library_path(
    gpu_host: tuple[Path, Servers], profile: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]  # noqa: F811
) -> None:
    python, _ = gpu_host
    pip_install(python, *cuda_wheels(tmp_path / "wheels"))
    lib64 = toolkit(tmp_path / "usr-local")
    profile.write_text("export NCCL_DEBUG=WARN\n")

    def install_toolkit_and_export_it() -> None:
        profile.write_text(f"export NCCL_DEBUG=WARN\nexport LD_LIBRARY_PATH={lib64}:$LD_LIBRARY_PATH\n")
        # innocent beside it: an unrelated package installed the same afternoon
        write_dist_info(site_packages(tmp_path / "venv"), "rich", "rich", "13.9.4", [], {"rich/__init__.py": ""})

    changes, first_line = snapshot_and_diff(capsys, install_toolkit_and_export_it)
    top = changes[0]
    assert (top["category"], top["severity"]) == ("cuda", "high")
    assert top["item"] == f"libnvJitLink.so.12 ({python})"
    assert top["explanation"].startswith(
        f"libnvJitLink.so.12 needed by libcusparse.so.12 ({python}) now resolves to "
        f"{lib64 / 'libnvJitLink.so.12.1.105'} (12.1.105, build-id 12112105…) through LD_LIBRARY_PATH ({lib64}), "
        "which ld.so searches before libcusparse.so.12's RUNPATH $ORIGIN/../../nvjitlink/lib, not the wheel's copy "
        "(nvidia-nvjitlink-cu12 12.4.127) (was the wheel's copy (nvidia-nvjitlink-cu12 12.4.127)): an older build "
        "(12.1.105) than the wheel's (12.4.127), so the libraries built against the wheel fail with "
        "'undefined symbol: …, version libnvJitLink.so.12'")
    assert "libnvJitLink.so.12" in first_line and "LD_LIBRARY_PATH" in first_line
    assert any(c["item"] == "rich" for c in changes)

    capsys.readouterr()
    assert main(["doctor", "testhost@latest", "--json"]) == 2
    [report] = json.loads(capsys.readouterr().out)
    [finding] = [f for f in report["findings"] if f["rule"] == "shadowed-library"]
    assert finding["evidence"] == "predicted" and finding["severity"] == "high"
    assert finding["why"].startswith(f"{python}: libcusparse.so.12 would load {lib64 / 'libnvJitLink.so.12.1.105'}")
    assert "LD_LIBRARY_PATH" in finding["fix"]
    capsys.readouterr()
    assert main(["doctor", "testhost@good", "--json"]) in (0, 2)
    [report] = json.loads(capsys.readouterr().out)
    assert not [f for f in report["findings"] if f["rule"] == "shadowed-library"]


def test_a_server_that_mapped_the_toolkits_copy_says_which_step_found_it(
    gpu_host: tuple[Path, Servers], tmp_path: Path, capsys: pytest.CaptureFixture[str]  # noqa: F811
) -> None:
    python, servers = gpu_host
    pip_install(python, *cuda_wheels(tmp_path / "wheels"))
    lib64 = toolkit(tmp_path / "usr-local")
    # The real loader resolves libcusparse.so.12's DT_NEEDED in the stand-in server: what it maps
    # is glibc's answer, which the finding explains.
    servers.start(env={"STANDIN_LOAD": str(site_packages(tmp_path / "venv") / CUSPARSE), "LD_LIBRARY_PATH": str(lib64)})
    assert main(["snapshot", "testhost"]) == 0
    capsys.readouterr()
    assert main(["doctor", "testhost@latest", "--json"]) == 2
    [report] = json.loads(capsys.readouterr().out)
    found = [f for f in report["findings"] if f["rule"] == "shadowed-library"]
    assert len(found) == 1, [f["why"] for f in found]
    [finding] = found
    assert finding["evidence"] == "observed"
    assert finding["why"].startswith(
        f"the server sglang.launch_server maps {lib64 / 'libnvJitLink.so.12.1.105'} (version 12.1.105), not its "
        f"wheels' nvidia/nvjitlink/lib/libnvJitLink.so.12 (nvidia-nvjitlink-cu12 12.4.127): another copy is found "
        f"first: libcusparse.so.12 finds it through LD_LIBRARY_PATH ({lib64}), which ld.so searches before "
        "libcusparse.so.12's RUNPATH $ORIGIN/../../nvjitlink/lib")


@pytest.fixture
def user_site(sshd: Sshd) -> Iterator[Path]:
    """~/.local/lib/pythonX.Y/site-packages of the shared sshd's session user, removed after."""
    local = sshd.workdir / "home" / ".local"
    site = local / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    site.mkdir(parents=True)
    try:
        yield site
    finally:
        shutil.rmtree(local)


def test_venv_with_system_site_packages_imports_the_user_sites_torch_once_its_own_is_gone(
    gpu_host: tuple[Path, Servers], user_site: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]  # noqa: F811
) -> None:
    python, _ = gpu_host
    venv_site = site_packages(tmp_path / "venv")
    # Months ago: pip install --user torch==2.3.0. The venv, created with --system-site-packages,
    # sees the user site after its own site-packages: its own torch 2.8.0 wins.
    write_dist_info(user_site, "torch", "torch", "2.3.0", [], {"torch/__init__.py": "", "torch/version.py": ""})
    cfg = tmp_path / "venv" / "pyvenv.cfg"
    cfg.write_text(cfg.read_text().replace("include-system-site-packages = false", "include-system-site-packages = true"))

    def reinstall_that_stopped_halfway() -> None:  # pip uninstall torch, then the install failed
        shutil.rmtree(next(venv_site.glob("torch-*.dist-info")))
        shutil.rmtree(venv_site / "torch")
        write_dist_info(venv_site, "rich", "rich", "13.9.4", [], {"rich/__init__.py": ""})  # innocent

    changes, first_line = snapshot_and_diff(capsys, reinstall_that_stopped_halfway)
    # First: the import that moved to the user site, carrying torch's version line right under it
    # (the other copy, not an install), which the finding ties to the user site with its mechanism.
    moved, top = changes[0], changes[1]
    assert moved["item"] == f"torch (sys.path, {python})"
    assert moved["explanation"].startswith(
        f"torch is now imported from {user_site} (2.3.0) by {python}, where it came from {venv_site} (2.8.0+cu128): "
        "it is the user site-packages, which this venv sees because it includes system site packages (pyvenv.cfg)")
    assert (top["category"], top["item"], top["severity"]) == ("package", "torch", "high")
    assert top["explanation"].startswith("torch 2.8.0+cu128 → 2.3.0")
    mechanism = (f"{python} imports torch 2.3.0 from {user_site}, a copy outside the environment: it is the user "
                 "site-packages, which this venv sees because it includes system site packages (pyvenv.cfg)")
    assert f"— known-bad state (observed): {mechanism}" in top["explanation"]
    assert "most likely cause: torch 2.3.0 is now imported from the user site-packages" in first_line
    capsys.readouterr()
    assert main(["doctor", "testhost@latest", "--json"]) == 2
    [report] = json.loads(capsys.readouterr().out)
    found = [f for f in report["findings"] if f["rule"] == "shadowed-package"]
    assert len(found) == 1, [f["why"] for f in found]
    [finding] = found
    assert finding["why"].startswith(f"{python} imports torch 2.3.0 from {user_site}, a copy outside the environment")
    assert "PYTHONNOUSERSITE=1" in finding["fix"]
    capsys.readouterr()
    assert main(["doctor", "testhost@good", "--json"]) in (0, 2)
    [report] = json.loads(capsys.readouterr().out)
    assert not [f for f in report["findings"] if f["rule"] == "shadowed-package"]


def test_a_stale_torchrun_in_local_bin_beside_the_venvs(
    gpu_host: tuple[Path, Servers], user_site: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]  # noqa: F811
) -> None:
    python, _ = gpu_host
    venv_bin = tmp_path / "venv" / "bin"
    (venv_bin / "torchrun").write_text(f"#!{python}\nfrom torch.distributed.run import main\nmain()\n")
    local_bin = user_site.parents[2] / "bin"  # ~/.local/bin

    def pip_install_user_torch() -> None:  # pip install --user torch with the system python, long ago
        local_bin.mkdir()
        (local_bin / "torchrun").write_text("#!/usr/bin/python3\nfrom torch.distributed.run import main\nmain()\n")

    changes, _ = snapshot_and_diff(capsys, pip_install_user_torch)
    top = changes[0]
    assert (top["category"], top["item"]) == ("python", f"{local_bin}/torchrun")
    assert top["explanation"].startswith(
        f"{local_bin}/torchrun appeared (#!/usr/bin/python3), a command {python}'s environment has too: a login "
        "shell whose PATH has ~/.local/bin first (Ubuntu's ~/.profile prepends it) runs this one: it runs "
        f"/usr/bin/python3, not {python}")
    capsys.readouterr()
    assert main(["doctor", "testhost@latest", "--json"]) == 2
    [report] = json.loads(capsys.readouterr().out)
    [finding] = [f for f in report["findings"] if f["rule"] == "user-bin-shadows-command"]
    assert finding["why"].startswith(f"{local_bin}/torchrun shadows {python}'s torchrun")
