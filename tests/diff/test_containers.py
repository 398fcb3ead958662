"""The containers area's diff: the image as one headline carrying its inner changes, the
container and limit changes, and servers paired by what they serve (never crosswise)."""

from __future__ import annotations

import copy
from typing import Any

from driftwatch.diff import DiffOptions
from driftwatch.explain import diff_snapshots
from driftwatch.diff.servers import match_servers
from tests.diff.builders import dist, make_snapshot

OLD_ID, NEW_ID = "sha256:59ef" + "0" * 60, "sha256:cc75" + "1" * 60


def server_process(model: str, container: str | None, port: str = "30000", env: dict[str, str] | None = None) -> dict[str, Any]:
    facts: dict[str, Any] = {
        "kind": "sglang", "entry": "sglang.launch_server", "model": model,
        "argv": ["python3", "-m", "sglang.launch_server", "--model-path", model, "--tp", "8", "--port", port],
        "args": {"model_path": model, "tp_size": "8", "port": port}, "cwd": "/", "exe": "/usr/bin/python3.11",
        "env": env or {}, "libraries": [], "volatile": {"pid": 1, "ppid": 1, "start_time": 1.0},
    }
    if container:
        facts["container"] = container
    return facts


def limits(shm: int = 64 << 20, cpu: float | None = 1.5, omp: str | None = None) -> dict[str, Any]:
    return {
        "limits": {"memlock": {"soft": 8 << 20, "hard": 8 << 20}, "nofile": {"soft": 1024, "hard": 4096}, "error": None},
        "cgroup": {"cpu_limit": cpu, "cpu_limit_at": "/docker/abc" if cpu else None, "cpuset": "0-63", "memory_limit": None,
                   "memory_limit_at": None},
        "shm": {"size": shm, "error": None, "nccl_segments": 0, "stale_nccl_segments": 0, "stale_nccl_bytes": 0,
                "volatile": {"free": shm, "used": 0}},
        "threads": {"env": {"OMP_NUM_THREADS": omp} if omp else {}, "cpus_allowed": "0-63", "cpus_allowed_count": 64,
                    "thp_enabled": True, "volatile": {"threads": 1}},
        "error": None,
    }


def container(name: str, image_id: str = OLD_ID, cid: str = "a" * 64, created: str = "2026-02-10T09:00:00Z",
              started: str = "2026-02-19T08:00:00Z") -> dict[str, Any]:
    return {"runtime": "docker", "id": cid, "name": name, "pod": None, "label": name,
            "image": {"ref": "lmsysorg/sglang:latest", "id": image_id, "digests": [], "tags": ["lmsysorg/sglang:latest"],
                      "created": created},
            "created": started, "started": started, "restart_count": 0, "shm_size": 64 << 20, "ipc_mode": "private",
            "evidence": ["cgroup"], "cli": {"error": None}}


def stack(sgl_kernel: str = "0.3.16") -> dict[str, Any]:
    distributions = {"sgl-kernel": dist("sgl-kernel", sgl_kernel), "sglang": dist("sglang", "0.5.6"),
                     "torch": dist("torch", "2.8.0+cu128")}
    return {"python": {"executable": "/opt/venv/bin/python3", "version": "3.11", "prefix": "/opt/venv", "error": None,
                       "distributions": distributions},
            "libraries": {"files": {}, "servers": {}, "servers_error": None, "interpreters": {}, "system": [],
                          "integrity": {}, "truncated": False, "volatile": {}}}


def in_container(name: str, **kw: Any) -> dict[str, Any]:
    sgl_kernel = kw.pop("sgl_kernel", "0.3.16")
    lim = {k: kw.pop(k) for k in ("shm", "cpu", "omp") if k in kw}
    return {"container": container(name, **kw), **limits(**lim), **stack(sgl_kernel)}


def snapshot(minutes: int, processes: dict[str, Any], servers: dict[str, Any]) -> Any:
    kernel = {"numa_balancing": 0, "thp_enabled": "madvise", "thp_defrag": "madvise", "rdma_devices": []}
    return make_snapshot(minutes=minutes, processes={"servers": processes, "truncated": False, "login_shell": "/bin/bash",
                                                     "login_env": {}, "login_env_error": None},
                         containers={"servers": servers, "kernel": kernel, "volatile": {}})


def two(old_a: dict[str, Any], old_b: dict[str, Any], new_a: dict[str, Any], new_b: dict[str, Any]) -> Any:
    keys = ("sglang.launch_server@a", "sglang.launch_server@b")
    procs = {keys[0]: server_process("/models/a", "a"), keys[1]: server_process("/models/b", "b")}
    old = snapshot(0, procs, {keys[0]: old_a, keys[1]: old_b})
    new = snapshot(60, copy.deepcopy(procs), {keys[0]: new_a, keys[1]: new_b})
    return diff_snapshots(old, new, options=DiffOptions())


def test_image_moved_under_one_reference_is_one_headline_carrying_the_inner_changes() -> None:
    moved = {"image_id": NEW_ID, "created": "2026-02-25T14:02:00Z", "sgl_kernel": "0.3.17"}
    result = two(in_container("a"), in_container("b"), in_container("a", **moved), in_container("b", **moved))
    heads = [c for c in result.changes if c.category == "container" and c.item == "image lmsysorg/sglang:latest"]
    assert len(heads) == 1  # one move, however many containers run it
    head = heads[0]
    assert head.severity.value == "high" and head.magnitude > 10
    assert head.explanation.startswith("image lmsysorg/sglang:latest is now sha256:cc7511111111…, created 2026-02-25; "
                                       "was sha256:59ef00000000…, created 2026-02-10; inside it: sgl-kernel 0.3.16 → 0.3.17")
    assert "(containers a, b)" in head.explanation
    assert head.new["inside"] == ["sgl-kernel 0.3.16 → 0.3.17"] and head.new["servers"] == ["a", "b"]
    assert ("package", "sgl-kernel") in head.carries  # ranked above it, accepted with it
    inner = [c for c in result.changes if c.category == "package" and c.item == "sgl-kernel"]
    assert len(inner) == 2 and all("in container" in c.explanation for c in inner)  # each with its own why
    assert result.summary["total"] >= 3


def test_a_new_shm_size_cpu_quota_and_restart_are_changes_in_their_own_right() -> None:
    after = in_container("a", shm=32 << 30, cpu=4.0, cid="c" * 64, started="2026-02-25T14:03:00Z")
    result = two(in_container("a"), in_container("b"), after, in_container("b"))
    text = {c.item: c.explanation for c in result.changes}
    assert text["sglang.launch_server@a /dev/shm"].startswith("server sglang.launch_server@a's /dev/shm 64.0 MiB → 32.0 GiB")
    assert "CPU quota 1.5 CPUs → 4 CPUs" in text["sglang.launch_server@a cpu limit"]
    assert text["a restarted"].startswith("container a was re-created (cccccccccccc…, was aaaaaaaaaaaa…)")
    assert not any(c.item.startswith("sglang.launch_server@b") for c in result.changes)
    smaller = two(in_container("a", shm=32 << 30), in_container("b"), in_container("a"), in_container("b"))
    shm = next(c for c in smaller.changes if c.item == "sglang.launch_server@a /dev/shm")
    assert shm.severity.value == "high" and "NCCL's shared-memory transport" in shm.explanation


def test_a_server_moved_into_a_container() -> None:
    old = snapshot(0, {"sglang.launch_server": server_process("/models/a", None)},
                   {"sglang.launch_server": {"container": None, **limits(shm=16 << 30, cpu=None)}})
    new = snapshot(60, {"sglang.launch_server": server_process("/models/a", "a")},
                   {"sglang.launch_server": in_container("a")})
    result = diff_snapshots(old, new, options=DiffOptions())
    moved = next(c for c in result.changes if c.category == "container")
    assert moved.explanation.startswith("server sglang.launch_server now runs in a docker container a "
                                        "(image lmsysorg/sglang:latest, sha256:59ef00000000…)")
    assert not any("no longer running" in c.explanation for c in result.changes)


def test_two_servers_keep_their_identities_when_their_keys_move() -> None:
    """A second server came up: the first one's key gained its port. Paired by what they
    serve, nothing is reported as stopped, started or compared crosswise."""
    old = {"sglang.launch_server": server_process("/models/a", None, "30000", {"SGLANG_X": "a"})}
    new = {"sglang.launch_server:30000": server_process("/models/a", None, "30000", {"SGLANG_X": "a"}),
           "sglang.launch_server:30001": server_process("/models/b", None, "30001", {"SGLANG_X": "b"})}
    assert match_servers(old, new) == [("sglang.launch_server", "sglang.launch_server:30000")]
    result = diff_snapshots(snapshot(0, old, {}), snapshot(60, new, {}), options=DiffOptions())
    words = [c.explanation for c in result.changes]
    assert not any("no longer running" in w for w in words)
    assert any(w.startswith("server sglang.launch_server:30001 is running") for w in words)
    assert not any(c.item == "SGLANG_X" for c in result.changes)


def test_servers_alike_in_what_they_serve_are_not_paired_by_guess() -> None:
    twin = server_process("/models/a", None)
    assert match_servers({"x#1": twin, "x#2": twin}, {"y#1": twin, "y#2": twin}) == []


def test_kernel_settings() -> None:
    old = snapshot(0, {}, {})
    new = snapshot(60, {}, {})
    new.probes["containers"].facts["kernel"]["numa_balancing"] = 1
    result = diff_snapshots(old, new, options=DiffOptions())
    change = next(c for c in result.changes if c.item == "kernel.numa_balancing")
    assert change.old == 0 and change.new == 1 and change.severity.value == "medium"
