"""The kernel side of the stack, made on a real host over sshd: GPUDirect RDMA lost after a
reboot (NVIDIA/nccl #1343) and nv_peer_mem replaced by nvidia_peermem under an old NCCL
(NVIDIA/nccl #1676).

The sshd runs in its own mount namespace (tests/mountns.py) whose /sys/module,
/sys/class (with infiniband/) and /sys/kernel/mm (with memory_peers/) are directories of
the test, laid out as the kernel lays them out, and whose boot id is a file of the test: the
real modules probe reads them over a real SSH session, as it would on a GPU host with
Mellanox NICs. Beside the cause each bad state carries innocent changes (a reboot, another
refcount, a display module loaded).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from driftwatch.cli import main
from tests.mountns import bind_prefix, need_bind_mounts
from tests.sshd import find_sshd, start_sshd
from tests.test_stack_incidents import config, snapshot_and_diff
from tests.venvs import make_gpu_venv, site_packages, write_dist_info

DRIVER = "580.173.02"


def write_module(root: Path, name: str, version: str | None, holders: tuple[str, ...] = (), refcnt: int = 0) -> None:
    """/sys/module/NAME as the kernel shows a loaded module (in-tree ones have no version)."""
    base = root / name
    (base / "holders").mkdir(parents=True, exist_ok=True)
    (base / "initstate").write_text("live\n")
    (base / "refcnt").write_text(f"{refcnt}\n")
    if version is not None:
        (base / "version").write_text(version + "\n")
        (base / "srcversion").write_text("A1B2C3D4E5F60718293A4B5\n")
    for holder in holders:
        (base / "holders" / holder).mkdir(exist_ok=True)


def write_hca(root: Path, name: str, state: str = "4: ACTIVE") -> None:
    base = root / "infiniband" / name
    (base / "ports" / "1").mkdir(parents=True)
    for field, value in {"node_type": "1: CA", "fw_ver": "28.39.1002", "hca_type": "MT4129",
                         "board_id": "MT_0000000970"}.items():
        (base / field).write_text(value + "\n")
    for field, value in {"state": state, "phys_state": "5: LinkUp", "link_layer": "InfiniBand",
                         "rate": "400 Gb/sec (4X NDR)"}.items():
        (base / "ports" / "1" / field).write_text(value + "\n")


@pytest.fixture
def rdma_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Path]]:
    """An H200 host with two NDR HCAs, the NVIDIA driver and nvidia_peermem loaded."""
    files = {"module": tmp_path / "sys-module", "class": tmp_path / "sys-class", "mm": tmp_path / "sys-kernel-mm",
             "boot_id": tmp_path / "boot_id"}
    write_module(files["module"], "nvidia", DRIVER, holders=("nvidia_uvm", "nvidia_peermem", "nvidia_modeset"),
                 refcnt=310)
    write_module(files["module"], "nvidia_uvm", DRIVER, refcnt=4)
    write_module(files["module"], "nvidia_modeset", DRIVER)
    write_module(files["module"], "nvidia_peermem", DRIVER)
    write_module(files["module"], "ib_core", None, holders=("mlx5_ib", "ib_uverbs", "nvidia_peermem"), refcnt=9)
    write_module(files["module"], "ib_uverbs", None)
    write_module(files["module"], "mlx5_core", None, holders=("mlx5_ib",))
    write_module(files["module"], "mlx5_ib", None)
    for hca in ("mlx5_0", "mlx5_1"):
        write_hca(files["class"], hca)
    files["mm"].mkdir()
    files["boot_id"].write_text("4f1e1c9a-0d7b-4c1e-9a51-3f2b7c0e8d11\n")
    binds = {"/sys/module": files["module"], "/sys/class": files["class"], "/sys/kernel/mm": files["mm"],
             "/proc/sys/kernel/random/boot_id": files["boot_id"]}
    need_bind_mounts(binds)
    exe = find_sshd() or pytest.skip("OpenSSH sshd is not installed")
    server = start_sshd(tmp_path / "sshd", exe, prefix=bind_prefix(binds))
    try:
        server.fake_env()
        python = make_gpu_venv(tmp_path / "venv")
        config(tmp_path, server, f'python = ["{python}"]\nprocesses = []\n')
        monkeypatch.chdir(tmp_path)
        yield {**files, "site": site_packages(tmp_path / "venv")}
    finally:
        server.stop()


def reboot(host: dict[str, Path]) -> None:
    """What a reboot changes beside the modules: the boot id and the refcounts."""
    host["boot_id"].write_text("9b2d5e7f-1a3c-4e6b-8d0f-2c4a6e8b0d13\n")
    (host["module"] / "nvidia" / "refcnt").write_text("296\n")


def test_gpudirect_rdma_lost_after_a_reboot(rdma_host: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    def reboot_without_peermem() -> None:
        reboot(rdma_host)
        shutil.rmtree(rdma_host["module"] / "nvidia_peermem")
        (rdma_host["module"] / "nvidia" / "holders" / "nvidia_peermem").rmdir()
        (rdma_host["module"] / "ib_core" / "holders" / "nvidia_peermem").rmdir()
        write_module(rdma_host["module"], "nvidia_drm", DRIVER)  # innocent: the display module loads too

    changes, first_line = snapshot_and_diff(capsys, reboot_without_peermem)
    top = changes[0]
    assert (top["category"], top["item"], top["severity"]) == ("driver", "GPUDirect RDMA", "high")
    assert top["explanation"].startswith(
        "GPUDirect RDMA is lost on this host with RDMA devices mlx5_0, mlx5_1: nvidia_peermem no longer loaded, "
        "so NCCL's InfiniBand transport can no longer register GPU memory with the NIC")
    assert "GPUDirect RDMA is lost" in first_line
    items = [c["item"] for c in changes]
    assert "boot_id" in items and "nvidia_drm" in items  # the innocent changes are there, below it
    assert items.count("nvidia_peermem") == 0  # said once, as GPUDirect RDMA

    capsys.readouterr()
    assert main(["doctor", "testhost@latest", "--json"]) == 2
    [report] = json.loads(capsys.readouterr().out)
    findings = report["findings"]
    gdr = [f for f in findings if f["rule"] == "gpudirect-rdma-missing"]
    assert len(gdr) == 1 and gdr[0]["severity"] == "high"
    assert gdr[0]["why"].startswith("this host has RDMA devices mlx5_0, mlx5_1 but no GPUDirect RDMA module")
    assert "modprobe nvidia_peermem" in gdr[0]["fix"]
    assert main(["doctor", "testhost@good", "--json"]) in (0, 2)
    [report] = json.loads(capsys.readouterr().out)
    assert not [f for f in report["findings"] if f["rule"].startswith("gpudirect")]


def test_nv_peer_mem_replaced_by_nvidia_peermem_under_an_old_nccl(
    rdma_host: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    # Before the OS upgrade: Mellanox's nv_peer_mem, registered as the peer-memory client nv_mem.
    shutil.rmtree(rdma_host["module"] / "nvidia_peermem")
    write_module(rdma_host["module"], "nv_peer_mem", "1.3")
    (rdma_host["mm"] / "memory_peers" / "nv_mem").mkdir(parents=True)
    (rdma_host["mm"] / "memory_peers" / "nv_mem" / "version").write_text("1.3\n")
    site = rdma_host["site"]
    shutil.rmtree(next(site.glob("nvidia_nccl_cu12-*.dist-info")))
    write_dist_info(site, "nvidia_nccl_cu12", "nvidia-nccl-cu12", "2.21.5", [], {"nvidia/nccl/__init__.py": ""})

    def upgrade_os() -> None:  # DGX OS 25.01: the driver's nvidia_peermem replaces nv_peer_mem
        reboot(rdma_host)
        shutil.rmtree(rdma_host["module"] / "nv_peer_mem")
        shutil.rmtree(rdma_host["mm"] / "memory_peers")
        write_module(rdma_host["module"], "nvidia_peermem", DRIVER)

    changes, first_line = snapshot_and_diff(capsys, upgrade_os)
    top = changes[0]
    assert (top["category"], top["item"], top["severity"]) == ("driver", "GPUDirect RDMA", "high")
    assert top["explanation"].startswith(
        "GPUDirect RDMA is now provided by nvidia_peermem instead of nv_peer_mem (an OS or driver upgrade replaces "
        "nv_peer_mem by the driver's nvidia_peermem): NCCL up to 2.22.3 looks only for nv_peer_mem's "
        "/sys/kernel/mm/memory_peers/nv_mem and then disables GPUDirect RDMA — known-bad state (predicted): "
        "nvidia-nccl-cu12 2.21.5")
    assert "nvidia_peermem" in first_line
    capsys.readouterr()
    assert main(["doctor", "testhost@latest", "--json"]) == 2
    [report] = json.loads(capsys.readouterr().out)
    rules = [f["rule"] for f in report["findings"]]
    assert "nccl-misses-nvidia-peermem" in rules and "gpudirect-rdma-missing" not in rules
