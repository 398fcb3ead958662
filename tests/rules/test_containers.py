"""The containers rules: what a server's /dev/shm, CPU quota and memlock do to it."""

from __future__ import annotations

from typing import Any

from driftwatch.rules.registry import diagnose
from tests.builders import snapshot


def server(tp: str = "8", **limits: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    process = {"entry": "sglang.launch_server", "model": "/models/m", "args": {"tp_size": tp}, "env": {}}
    facts = {
        "container": limits.pop("container", {"runtime": "docker", "name": "sg", "label": "sg", "pod": None}),
        "limits": {"memlock": {"soft": limits.pop("memlock", 8 << 20), "hard": 8 << 20}, "error": None},
        "cgroup": {"cpu_limit": limits.pop("cpu", None), "cpu_limit_at": "/kubepods/pod1"},
        "shm": {"size": limits.pop("shm", 32 << 30), "error": None, "stale_nccl_segments": limits.pop("stale", 0),
                "stale_nccl_bytes": 3 << 20, "volatile": {"free": limits.pop("free", 32 << 30)}},
        "threads": {"env": limits.pop("env", {}), "cpus_allowed_count": 64},
    }
    return process, facts


def findings(rdma: list[str] | None = None, **limits: Any) -> dict[str, list[Any]]:
    process, facts = server(**limits)
    snap = snapshot(processes={"servers": {"sglang.launch_server": process}},
                    containers={"servers": {"sglang.launch_server": facts}, "kernel": {"rdma_devices": rdma}})
    found: dict[str, list[Any]] = {}
    for finding in diagnose(snap).findings:
        found.setdefault(finding.rule, []).append(finding)
    return found


def test_docker_default_shm_under_a_tp8_server() -> None:
    [finding] = findings(shm=64 << 20)["shm-too-small"]
    assert finding.severity.value == "high" and "runs on 8 GPUs with a 64.0 MiB /dev/shm" in finding.why
    assert "--shm-size 32g" in finding.fix and "nccl/issues/342" in finding.reference
    assert ("process", "sglang.launch_server /dev/shm") in finding.subjects
    assert "shm-too-small" not in findings(shm=64 << 20, tp="1")  # one GPU: NCCL's SHM transport is not used
    assert "shm-too-small" not in findings()
    pod = {"runtime": "containerd", "name": "server", "label": "ns/p/server", "pod": {"name": "p"}}
    [in_pod] = findings(shm=64 << 20, container=pod)["shm-too-small"]
    assert "emptyDir with medium: Memory" in in_pod.fix


def test_nearly_full_or_stale_shm() -> None:
    kinds = {f.key: f for f in findings(shm=1 << 30, free=10 << 20, stale=2)["shm-too-small"]}
    assert "nearly full (10.0 MiB free of 1.0 GiB)" in kinds["sglang.launch_server"].why
    assert "2 NCCL segments older than the server" in kinds["sglang.launch_server: stale"].why


def test_cpu_quota_below_the_threads_started() -> None:
    [finding] = findings(cpu=2.0)["cpu-limit-below-threads"]
    assert "may use 2 CPUs" in finding.why and "start 64 threads (OMP_NUM_THREADS unset" in finding.why
    assert finding.fix.startswith("set OMP_NUM_THREADS=2") and "vllm/issues/9113" in finding.reference
    assert "cpu-limit-below-threads" not in findings(cpu=2.0, env={"OMP_NUM_THREADS": "2"})
    assert "cpu-limit-below-threads" not in findings(cpu=None)


def test_memlock_only_where_rdma_devices_are() -> None:
    [finding] = findings(rdma=["mlx5_0", "mlx5_1"])["memlock-small-with-rdma"]
    assert "may lock only 8.0 MiB" in finding.why and "mlx5_0" in finding.why and "memlock=-1" in finding.fix
    assert "memlock-small-with-rdma" not in findings(rdma=[])
    assert "memlock-small-with-rdma" not in findings(rdma=["mlx5_0"], memlock="unlimited")
    not_run = diagnose(snapshot(containers={"servers": {}, "kernel": {"rdma_devices": None}})).not_run
    assert any(n.rule == "memlock-small-with-rdma" for n in not_run)
