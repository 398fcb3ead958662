"""Fleet comparison of library builds and driver layers: hosts whose venvs live at other
paths and whose boot lines name their own disks still agree; another build of the same
NCCL, a userspace driver out of step or a dropped iommu=pt is the odd host's finding."""

from __future__ import annotations

from typing import Any

from driftwatch.diff import Severity
from driftwatch.probes.driver import parse_cmdline
from tests.fleet.builders import Facts, fleet

A = "a7f4c0de" * 5
B = "c0db1e55" * 5


def stack(facts: Facts, n: int) -> None:
    """Libraries and driver facts as host n records them: its venv under /srv/gpu0n."""
    site = f"/srv/gpu{n:02d}/venv/lib/python3.12/site-packages"
    lib = f"{site}/nvidia/nccl/lib/libnccl.so.2"
    facts["libraries"] = {
        "files": {lib: {"size": 219_000_000, "mtime": 1000.0 * n, "build_id": A, "soname": "libnccl.so.2",
                        "error": None, "owners": {"nvidia-nccl-cu12": "2.27.3"}, "name": "libnccl.so.2",
                        "version": "2", "volatile": {"mtime_ns": n, "ctime_ns": n, "inode": n}}},
        "servers": {"sglang.launch_server": {"libnccl.so.2": [lib]}},
        "servers_error": None,
        "interpreters": {"python3": {"libraries": [lib], "error": None}},
        "system": [],
        "integrity": {"python3": {"distributions": {"nvidia-nccl-cu12": "2.27.3"}, "modified": {}, "missing": {},
                                  "unreadable": {}, "shared": {}, "error": None, "volatile": {"cache": {}}}},
        "truncated": False,
    }
    facts["processes"] = {"servers": {"sglang.launch_server": {"env": {}, "libraries": [], "exe": "/usr/bin/python3",
                                                               "cwd": "/root"}}}
    facts["driver"] = {
        "kernel_module": {"version": "570.86.15", "flavor": "open", "arch": "x86_64", "source": "/proc/driver/nvidia/version"},
        "userspace": {"version": "570.86.15", "libraries": {}},
        "fabric_manager": None, "persistenced": {"installed": True, "running": True}, "container_toolkit": None,
        "nvswitches": 0,
        "cmdline": parse_cmdline(f"BOOT_IMAGE=/vmlinuz root=UUID=4f1e-{n} ro intel_iommu=on iommu=pt"),
    }


def hosts(count: int, odd: dict[int, Any] | None = None) -> Any:
    def edit(n: int) -> Any:
        def apply(facts: Facts) -> None:
            stack(facts, n)
            if odd and n in odd:
                odd[n](facts)
        return apply
    return fleet(count, {n: edit(n) for n in range(1, count + 1)})


def test_look_alike_hosts_agree_whatever_their_paths_and_disks() -> None:
    result = hosts(3)
    assert result.agree, [f.explanation for f in result.findings]


def test_another_build_of_the_same_nccl_on_one_host() -> None:
    def rebuilt(facts: Facts) -> None:
        [entry] = facts["libraries"]["files"].values()
        entry.update(build_id=B, size=190_000_000)

    result = hosts(4, {2: rebuilt})
    explanations = [f.explanation for f in result.findings]
    # Build-ids shortened as diff shows them: 8 characters, not 40 hex.
    assert (f"gpu02: libnccl.so.2 mapped by sglang.launch_server (copy and build-id) nvidia/nccl/lib/libnccl.so.2 "
            f"{B[:8]}… where the other 3 hosts have nvidia/nccl/lib/libnccl.so.2 {A[:8]}…") in explanations
    assert f"gpu02: nvidia/nccl/lib/libnccl.so.2 build-id (python3) {B[:8]}… where the other 3 hosts have {A[:8]}…" in explanations
    assert {f.severity for f in result.findings} == {Severity.high}


def test_driver_out_of_step_and_a_dropped_iommu_setting() -> None:
    def out_of_step(facts: Facts) -> None:
        facts["driver"]["userspace"]["version"] = "570.133.20"

    def no_passthrough(facts: Facts) -> None:
        facts["driver"]["cmdline"]["params"].pop("iommu")

    result = hosts(4, {1: out_of_step, 3: no_passthrough})
    first = result.findings[0]
    assert first.explanation == "gpu01: userspace driver (libcuda) 570.133.20 where the other 3 hosts have 570.86.15"
    assert first.severity is Severity.critical
    assert any(f.explanation.startswith("gpu03: kernel parameter iommu") for f in result.findings)
