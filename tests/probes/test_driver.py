"""The driver probe: pure parsers on real captures (tests/fixtures/driver/README.md names the
source of each), and the probe on this machine, which has no NVIDIA driver at all."""

from __future__ import annotations

from pathlib import Path

import pytest

from driftwatch.collect import run_probe
from driftwatch.model import ProbeStatus
from driftwatch.probes.base import ProbeContext, ProbeError
from driftwatch.probes.driver import (
    DriverProbe,
    parse_cmdline,
    parse_ctk_version,
    parse_driver,
    parse_fabricmanager_version,
    parse_proc_version,
    parse_userspace,
)
from driftwatch.transport.local import LocalTransport
from tests.sshd import find_sshd, start_sshd

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "driver"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("proprietary-x86_64-580.173.02.txt", {"version": "580.173.02", "flavor": "proprietary", "arch": "x86_64"}),
        ("proprietary-x86_64-550.90.07.txt", {"version": "550.90.07", "flavor": "proprietary", "arch": "x86_64"}),
        ("open-x86_64-565.57.01.txt", {"version": "565.57.01", "flavor": "open", "arch": "x86_64"}),
        ("open-x86_64-525.60.11.txt", {"version": "525.60.11", "flavor": "open", "arch": "x86_64"}),
        ("open-aarch64-35.3.1.txt", {"version": "35.3.1", "flavor": "open", "arch": "aarch64"}),
    ],
)
def test_proc_driver_nvidia_version(name: str, expected: dict[str, str]) -> None:
    assert parse_proc_version(fixture(f"proc-version/{name}")) == expected


def test_proc_version_that_is_not_the_nvidia_format() -> None:
    assert parse_proc_version("GCC version:  gcc version 14.2.0\n") is None


def test_fabric_manager_version() -> None:
    assert parse_fabricmanager_version(fixture("fabricmanager/450.102.04.txt")) == "450.102.04"
    assert parse_fabricmanager_version("nv-fabricmanager: error while loading shared libraries") is None


def test_container_toolkit_version() -> None:
    assert parse_ctk_version(fixture("nvidia-ctk/1.12.0.txt")) == {
        "version": "1.12.0", "commit": "62bd015475656ef795cb0d59cc4030a6bd4a9526"}


def test_cmdline_keeps_backslashes_and_stops_at_init_arguments() -> None:
    proxmox = parse_cmdline(fixture("cmdline/proxmox-intel-iommu.txt"))["params"]
    assert proxmox["intel_iommu"] == "on" and proxmox["iommu"] == "pt" and proxmox["quiet"] is None
    assert proxmox["initrd"] == "\\EFI\\proxmox\\6.8.12-1-pve\\initrd.img-6.8.12-1-pve"
    assert proxmox["root"] == "ZFS=rpool/ROOT/pve-1"
    guest = parse_cmdline(fixture("cmdline/firecracker-guest.txt"))
    assert guest["params"]["console"] == "ttyS0" and "--addr" not in guest["params"]
    assert guest["text"] == fixture("cmdline/firecracker-guest.txt").strip()
    assert parse_cmdline('dyndbg="file x.c +p" ro')["params"] == {"dyndbg": "file x.c +p", "ro": None}


def test_userspace_version_is_the_libcuda_the_loader_finds_first() -> None:
    lines = (
        "ld_library_path\t/opt/compat/libcuda.so.1\t/opt/compat/libcuda.so.570.133.20\n"
        "ldconfig\t/usr/lib/x86_64-linux-gnu/libcuda.so.1\t/usr/lib/x86_64-linux-gnu/libcuda.so.570.86.15\n"
        "ldconfig\t/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1\t/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.570.86.15\n"
        "dir\t/usr/lib/x86_64-linux-gnu/libcuda.so\t\n"  # a dangling link: no version
    )
    assert parse_userspace(lines) == {
        "version": "570.133.20",
        "libraries": {
            "/opt/compat/libcuda.so.570.133.20": "570.133.20",
            "/usr/lib/x86_64-linux-gnu/libcuda.so": None,
            "/usr/lib/x86_64-linux-gnu/libcuda.so.570.86.15": "570.86.15",
            "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.570.86.15": "570.86.15",
        },
    }


def script_output(**sections: str) -> str:
    """What the driver script prints, with the given sections (others empty)."""
    names = ["proc_version", "sys_version", "userspace", "persistenced_path", "running", "nvswitches", "cmdline"]
    body = {name: "" for name in names} | {"nvswitches": "0"} | sections
    return "".join(f"@@{name}\n{text}\n" for name, text in body.items()) + "@@end\n"


def test_a_host_with_every_layer() -> None:
    facts = parse_driver(script_output(
        proc_version=fixture("proc-version/open-x86_64-565.57.01.txt"),
        userspace="ldconfig\t/usr/lib/x86_64-linux-gnu/libcuda.so.1\t/usr/lib/x86_64-linux-gnu/libcuda.so.565.57.01",
        fm_version=fixture("fabricmanager/450.102.04.txt"), fm_rc="0", fm_installed="", fm_service="active",
        persistenced_path="/usr/bin/nvidia-persistenced", running="nvidia-persiste\nnv-fabricmanage",
        ctk_version=fixture("nvidia-ctk/1.12.0.txt"), ctk_rc="0", nvswitches="4",
        cmdline=fixture("cmdline/proxmox-intel-iommu.txt"),
    ))
    assert facts["kernel_module"] == {"version": "565.57.01", "flavor": "open", "arch": "x86_64",
                                      "source": "/proc/driver/nvidia/version"}
    assert facts["userspace"]["version"] == "565.57.01"
    assert facts["fabric_manager"] == {"version": "450.102.04", "error": None, "service": "active",
                                       "service_error": None, "running": True}
    assert facts["persistenced"] == {"installed": True, "running": True}
    assert facts["container_toolkit"]["version"] == "1.12.0" and facts["nvswitches"] == 4


def test_failing_tools_are_errors_and_missing_ones_absent() -> None:
    facts = parse_driver(script_output(
        sys_version="570.86.15",
        fm_version="nv-fabricmanager: error while loading shared libraries: libnvfm.so.1", fm_rc="127",
        fm_installed="", fm_service="System has not been booted with systemd as init system (PID 1). Can't operate.",
        ctk_version="", ctk_rc="124",
    ))
    assert facts["kernel_module"] == {"version": "570.86.15", "flavor": None, "arch": None,
                                      "source": "/sys/module/nvidia/version"}
    fm = facts["fabric_manager"]
    assert fm["version"] is None and fm["error"] == "exit 127: nv-fabricmanager: error while loading shared libraries: libnvfm.so.1"
    assert fm["service"] is None and fm["service_error"].startswith("System has not been booted with systemd")
    assert facts["container_toolkit"] == {"version": None, "commit": None, "error": "timed out"}
    nothing = parse_driver(script_output())
    assert nothing["kernel_module"] is None and nothing["fabric_manager"] is None
    assert nothing["container_toolkit"] is None and nothing["userspace"] == {"version": None, "libraries": {}}


def test_output_cut_short_is_an_error_not_an_empty_host() -> None:
    with pytest.raises(ProbeError, match="incomplete"):
        parse_driver(script_output().replace("@@end\n", ""))


def test_this_machine_has_no_driver_and_says_so() -> None:
    record = run_probe(DriverProbe(), ProbeContext(transport=LocalTransport()))
    assert record.status is ProbeStatus.ok, record.error
    facts = record.facts
    if Path("/proc/driver/nvidia/version").exists() or Path("/sys/module/nvidia").exists():
        pytest.skip("this machine has an NVIDIA driver loaded")
    assert facts["kernel_module"] is None  # looked: no module loaded
    assert facts["cmdline"]["text"] == Path("/proc/cmdline").read_text().strip()


def test_over_ssh_broken_tools_are_errors_and_the_other_layers_still_facts(tmp_path: Path) -> None:
    exe = find_sshd() or pytest.skip("OpenSSH sshd is not installed")
    server = start_sshd(tmp_path / "sshd", exe)  # its own session PATH, so the broken tools stay here
    tools = server.workdir / "bin"
    (tools / "nvidia-ctk").write_text(
        "#!/bin/sh\necho 'nvidia-ctk: error while loading shared libraries: libnvidia-container.so.1: "
        "cannot open shared object file: No such file or directory' >&2\nexit 127\n")
    (tools / "nv-fabricmanager").write_text("#!/bin/sh\nsleep 30\n")  # hangs, as on a wedged driver
    for tool in ("nvidia-ctk", "nv-fabricmanager"):
        (tools / tool).chmod(0o755)
    try:
        with server.transport() as transport:
            record = run_probe(DriverProbe(), ProbeContext(transport=transport, timeout=4))
    finally:
        server.stop()
    assert record.status is ProbeStatus.ok, record.error
    facts = record.facts
    assert facts["container_toolkit"]["error"].startswith("exit 127: nvidia-ctk: error while loading shared libraries")
    assert facts["fabric_manager"]["version"] is None and facts["fabric_manager"]["error"] == "timed out"
    assert facts["cmdline"]["text"] == Path("/proc/cmdline").read_text().strip()
    if not Path("/proc/driver/nvidia/version").exists() and not Path("/sys/module/nvidia").exists():
        assert facts["kernel_module"] is None
