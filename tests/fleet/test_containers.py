"""Fleet facts of the containers: the image behind one reference, and each server's limits."""

from __future__ import annotations

from typing import Any

from tests.fleet.builders import Facts, fleet

REF = "lmsysorg/sglang:latest"


def containers(image_id: str = "sha256:" + "c" * 64, shm: int = 32 << 30, name: str = "sg") -> dict[str, Any]:
    server = {"container": {"runtime": "docker", "id": name * 8, "name": name, "image": {"ref": REF, "id": image_id}},
              "shm": {"size": shm, "error": None}, "cgroup": {"cpu_limit": None}, "limits": {"memlock": {"soft": "unlimited"}}}
    return {"servers": {"sglang.launch_server": server}, "kernel": {"numa_balancing": 0, "thp_enabled": "madvise"}}


def with_containers(**kw: Any):  # type: ignore[no-untyped-def]
    def edit(facts: Facts) -> None:
        facts["containers"] = containers(**kw)
    return edit


def test_a_host_that_pulled_the_reference_at_another_time_is_the_odd_one_out() -> None:
    same = with_containers()
    edits = {n: same for n in range(1, 5)}
    edits[3] = with_containers(image_id="sha256:" + "d" * 64, name="other-name")  # names are identity, never compared
    result = fleet(4, edits)
    [finding] = result.findings
    assert finding.category == "container" and finding.item == f"image {REF}"
    assert finding.outliers == (("gpu03", ("sha256:" + "d" * 64,)),)
    assert "the same reference, another image" in finding.explanation


def test_a_server_with_a_smaller_shm_is_named() -> None:
    edits = {n: with_containers() for n in range(1, 4)}
    edits[2] = with_containers(shm=64 << 20)
    [finding] = fleet(3, edits).findings
    assert finding.item == "sglang.launch_server shm" and finding.outliers == (("gpu02", 64 << 20),)
