"""GPUDirect RDMA rules over one snapshot: the modules facts of a host with Mellanox HCAs."""

from __future__ import annotations

from typing import Any

from driftwatch.diff.change import DiffOptions
from driftwatch.explain import diff_snapshots
from driftwatch.probes.modules import build_facts
from tests.rules.builders import baseline, dists, found, make_snapshot, not_run

DRIVER = "580.173.02"
HCA = {"node_type": "1: CA", "fw_ver": "28.39.1002", "hca_type": "MT4129",
       "ports": {"1": {"state": "4: ACTIVE", "phys_state": "5: LinkUp", "link_layer": "InfiniBand",
                       "rate": "400 Gb/sec (4X NDR)"}}}


def modules(*loaded: str, peers: tuple[str, ...] = (), files: dict[str, str] | None = None,
            hcas: tuple[str, ...] = ("mlx5_0", "mlx5_1"), error: str | None = None) -> dict[str, Any]:
    """The modules probe's facts, built by its own build_facts from a collector report."""
    raw = {name: {"present": True, "initstate": "live", "version": DRIVER if name.startswith("nv") else None,
                  "refcnt": "1", "holders": []} for name in loaded}
    return build_facts({
        "kernel": "6.8.0-60-generic", "modules": raw, "modules_error": error,
        "files": files if files is not None else {}, "files_error": None,
        "memory_peers": {p: {"version": "1.3", "error": None} for p in peers},
        "rdma": {h: HCA for h in hcas},
    })


def test_rdma_host_without_a_peer_memory_module() -> None:
    facts = modules("nvidia", "nvidia_uvm", "ib_core", "mlx5_core",
                    files={"nvidia_peermem": "updates/dkms/nvidia-peermem.ko.zst"})
    [finding] = found("gpudirect-rdma-missing", make_snapshot(modules=facts))
    assert finding.why.startswith(
        "this host has RDMA devices mlx5_0, mlx5_1 but no GPUDirect RDMA module: updates/dkms/nvidia-peermem.ko.zst "
        "is there for the running kernel 6.8.0-60-generic but not loaded")
    assert finding.fix.startswith("modprobe nvidia_peermem") and finding.severity.value == "high"
    no_file = modules("nvidia", "ib_core")
    [finding] = found("gpudirect-rdma-missing", make_snapshot(modules=no_file))
    assert "has no nvidia_peermem module" in finding.why and "DKMS" in finding.fix


def test_no_finding_with_a_module_or_without_rdma_devices() -> None:
    assert found("gpudirect-rdma-missing", make_snapshot(modules=modules("nvidia", "nvidia_peermem"))) == []
    assert found("gpudirect-rdma-missing", make_snapshot(modules=modules("nvidia", "ib_core", peers=("nv_mem",)))) == []
    assert not_run("gpudirect-rdma-missing", make_snapshot(modules=modules("nvidia", hcas=()))) == \
        "no RDMA devices on this host"
    unread = modules(hcas=("mlx5_0",), error="Permission denied")
    assert not_run("gpudirect-rdma-missing", make_snapshot(modules=unread)) == "the NVIDIA kernel module is not loaded"


def with_nccl(modules_facts: dict[str, Any], version: str) -> Any:
    facts = baseline()
    dists(facts)["nvidia-nccl-cu12"]["version"] = version
    return make_snapshot(**{**facts, "modules": modules_facts})


def test_old_nccl_under_nvidia_peermem() -> None:
    facts = modules("nvidia", "nvidia_peermem", "ib_core")
    [finding] = found("nccl-misses-nvidia-peermem", with_nccl(facts, "2.21.5"))
    assert finding.why.startswith("nvidia-nccl-cu12 2.21.5 (python3) looks only for nv_peer_mem")
    assert finding.reference == "https://github.com/NVIDIA/nccl/issues/1676"
    assert found("nccl-misses-nvidia-peermem", with_nccl(facts, "2.27.3")) == []
    with_client = modules("nvidia", "nvidia_peermem", peers=("nv_mem",))
    assert found("nccl-misses-nvidia-peermem", with_nccl(with_client, "2.21.5")) == []


def test_diff_names_the_lost_module_once_as_gpudirect_rdma() -> None:
    good = make_snapshot(modules=modules("nvidia", "nvidia_uvm", "nvidia_peermem", "ib_core"))
    bad = make_snapshot(minutes=5, modules=modules("nvidia", "nvidia_uvm", "ib_core"))
    changes = diff_snapshots(good, bad, options=DiffOptions()).changes
    assert [c.item for c in changes] == ["GPUDirect RDMA"]
    assert changes[0].explanation.startswith("GPUDirect RDMA is lost on this host with RDMA devices mlx5_0, mlx5_1")
    unread = make_snapshot(minutes=5, modules=modules(hcas=("mlx5_0", "mlx5_1"), error="Permission denied"))
    changes = diff_snapshots(good, unread, options=DiffOptions()).changes
    assert [c.item for c in changes] == ["(modules)"]  # unknown, never "no longer loaded"
    assert changes[0].explanation == "kernel modules could not be read: Permission denied; it is not compared"
