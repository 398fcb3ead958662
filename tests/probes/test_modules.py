"""The modules probe: its target-side reader over trees laid out as the kernel, modules.dep
and DKMS lay them out, the pure facts it builds, and a run on this machine."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from driftwatch.collect import run_probe
from driftwatch.model import ProbeStatus
from driftwatch.probes.base import ProbeContext
from driftwatch.probes.modules import ModulesProbe, build_facts
from driftwatch.transport.local import LocalTransport
from tests.test_stack_kernel import write_hca, write_module

SCRIPTS = Path(__file__).resolve().parents[2] / "driftwatch" / "probes" / "scripts"
# The shape of /lib/modules/<release>/modules.dep on Ubuntu 24.04 with the DKMS driver.
MODULES_DEP = """\
kernel/drivers/infiniband/core/ib_core.ko.zst:
kernel/drivers/net/ethernet/mellanox/mlx5/core/mlx5_core.ko.zst: kernel/drivers/net/ethernet/mellanox/mlxfw/mlxfw.ko.zst
updates/dkms/nvidia.ko.zst:
updates/dkms/nvidia-uvm.ko.zst: updates/dkms/nvidia.ko.zst
updates/dkms/nvidia-peermem.ko.zst: updates/dkms/nvidia.ko.zst kernel/drivers/infiniband/core/ib_core.ko.zst
"""


def collector() -> ModuleType:
    spec = importlib.util.spec_from_file_location("modules_collect", SCRIPTS / "modules_collect.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # main() only runs as __main__
    return module


def test_modules_as_sysfs_shows_them(tmp_path: Path) -> None:
    script = collector()
    write_module(tmp_path, "nvidia", "580.173.02", holders=("nvidia_uvm",), refcnt=12)
    write_module(tmp_path, "ib_core", None)
    (tmp_path / "nvidia_uvm" / "version").mkdir(parents=True)  # a version that cannot be read
    (tmp_path / "nvidia_uvm" / "initstate").write_text("live\n")
    (tmp_path / "crc32c").mkdir()  # built in: a /sys/module entry without initstate
    raw, error = script.modules({"modules": ["nvidia", "nvidia_uvm", "nvidia_peermem", "ib_core", "crc32c"]},
                                root=str(tmp_path))
    assert error is None
    facts = build_facts({"kernel": "6.8.0-60-generic", "modules": raw, "files": {}, "files_error": None})["modules"]
    assert facts["nvidia"]["loaded"] is True and facts["nvidia"]["version"] == "580.173.02"
    assert facts["nvidia"]["holders"] == ["nvidia_uvm"] and facts["nvidia"]["volatile"]["refcount"] == 12
    assert facts["nvidia_peermem"]["loaded"] is False
    assert facts["nvidia_uvm"]["loaded"] is True and facts["nvidia_uvm"]["version"] is None
    assert facts["nvidia_uvm"]["version_error"] == "/sys/module/nvidia_uvm/version: Is a directory"
    assert facts["ib_core"]["version_error"].startswith("no version file in /sys/module/ib_core")
    assert facts["crc32c"]["state"] == "built-in"


def test_an_unreadable_sys_module_is_no_module_unloaded(tmp_path: Path) -> None:
    script = collector()
    (tmp_path / "file").write_text("")
    raw, error = script.modules({"modules": ["nvidia"]}, root=str(tmp_path / "file"))
    facts = build_facts({"modules": raw, "modules_error": error or "x"})
    assert raw == {} and facts["modules"]["nvidia"]["loaded"] is None and facts["modules"]["nvidia"]["error"]
    raw, error = script.modules({"modules": ["nvidia"]}, root=str(tmp_path / "absent"))
    assert error == f"no {tmp_path / 'absent'} on this host"


def test_module_files_of_the_running_kernel(tmp_path: Path) -> None:
    script = collector()
    (tmp_path / "6.8.0-60-generic").mkdir()
    (tmp_path / "6.8.0-60-generic" / "modules.dep").write_text(MODULES_DEP)
    files, error = script.module_files("6.8.0-60-generic", ["nvidia_peermem", "nvidia_uvm", "nv_peer_mem"],
                                       root=str(tmp_path))
    assert error is None
    assert files == {"nvidia_peermem": "updates/dkms/nvidia-peermem.ko.zst", "nvidia_uvm": "updates/dkms/nvidia-uvm.ko.zst"}
    files, error = script.module_files("6.8.0-62-generic", ["nvidia"], root=str(tmp_path))
    assert files is None and error == f"{tmp_path}/6.8.0-62-generic/modules.dep: No such file or directory"


def test_dkms_builds_and_rdma_devices(tmp_path: Path) -> None:
    script = collector()
    dkms = tmp_path / "dkms"
    (dkms / "nvidia" / "580.173.02" / "6.8.0-57-generic" / "x86_64" / "module").mkdir(parents=True)
    (dkms / "nvidia" / "580.173.02" / "source").mkdir()
    (dkms / "nvidia" / "kernel-6.8.0-57-generic-x86_64").symlink_to("580.173.02/6.8.0-57-generic/x86_64")
    builds, error = script.dkms(str(dkms))
    assert error is None and builds == {"nvidia": {"580.173.02": ["6.8.0-57-generic/x86_64"]}}
    assert script.dkms(str(tmp_path / "none")) == (None, None)
    write_hca(tmp_path / "class", "mlx5_0")
    (tmp_path / "class" / "infiniband" / "mlx5_0" / "ports" / "1" / "rate").unlink()
    (tmp_path / "class" / "infiniband" / "mlx5_0" / "ports" / "1" / "rate").mkdir()
    devices, error = script.rdma(str(tmp_path / "class" / "infiniband"))
    assert error is None
    facts = build_facts({"rdma": devices})["rdma"]["mlx5_0"]
    assert facts["ports"]["1"]["state"] == "4: ACTIVE" and facts["hca_type"] == "MT4129"
    assert facts["errors"] == {"port 1 rate": "Is a directory"}  # said, never an absent rate


def test_the_probe_on_this_machine() -> None:
    ctx = ProbeContext(transport=LocalTransport(), timeout=30)
    record = run_probe(ModulesProbe(), ctx)
    assert record.status is ProbeStatus.ok, record.error
    assert set(record.facts["modules"]) >= {"nvidia", "nvidia_peermem", "ib_core"}
    for entry in record.facts["modules"].values():  # loaded, not loaded, or why it is unknown
        assert entry["loaded"] in (True, False) or entry["error"]
