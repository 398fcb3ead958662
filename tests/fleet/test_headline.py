"""The headline facts a fleet matrix shows for every host, and which fact paths they stand for."""

from __future__ import annotations

import pytest

from driftwatch.fleet.headline import COLUMNS, column_of, headline_facts
from driftwatch.model import ProbeStatus
from tests.diff.builders import dist, dists, failed, make_snapshot
from tests.diff.test_launch import SGLANG, processes
from tests.fleet.builders import fleet, host_facts


def test_a_gpu_host_at_a_glance() -> None:
    facts = host_facts(1)
    facts["processes"] = processes(*SGLANG, "--mem-fraction-static", "0.55")
    assert headline_facts(make_snapshot(**facts)) == {
        "driver": "590.48.01", "cuda": "13.1", "nvcc": "12.8.93", "torch": "2.8.0+cu128", "nccl": "2.27.3",
        "sglang": "0.5.6", "sgl-kernel": "0.3.16.post4", "flashinfer": "0.4.1", "gpu-model": "NVIDIA H200",
        "gpu-count": "2", "mem-fraction": "0.55",
    }


def test_a_failed_probe_says_nothing_rather_than_none() -> None:
    facts = host_facts(1)
    facts["gpu"] = failed(ProbeStatus.timeout, "nvidia-smi timed out after 10s")
    found = headline_facts(make_snapshot(**facts))
    assert found["driver"] == found["gpu-model"] == found["gpu-count"] == ""  # not "0 GPUs"
    assert found["nccl"] == "2.27.3"


def test_the_newer_kernel_package_name_and_a_second_nccl_wheel() -> None:
    facts = host_facts(1)
    del dists(facts)["sgl-kernel"]
    dists(facts)["sglang-kernel"] = dist("sglang-kernel", "0.4.0")
    dists(facts)["nvidia-nccl-cu13"] = dist("nvidia-nccl-cu13", "2.28.3")
    found = headline_facts(make_snapshot(**facts))
    assert found["sgl-kernel"] == "0.4.0" and found["nccl"] == "2.27.3, 2.28.3"


@pytest.mark.parametrize(("fact", "column"), [
    ("gpu.driver_version", "driver"),
    ("system.nvidia_modules[nvidia]", "driver"),
    ("cuda.nccl[nvidia-nccl-cu12]", "nccl"),
    ("python[python #1].dist[nvidia-nccl-cu12].record_sha256", "nccl"),
    ("cuda.torch[python3].git_version", "torch"),
    ("python[python3].dist[sglang-kernel]", "sgl-kernel"),
    ("gpu[1]", "gpu-model"),
    ("launch[gpu_memory_utilization]", "mem-fraction"),
    ("gpu[1].memory_total_mib", None),  # a column of its own
    ("python[python3].dist[sglang-router]", None),
    ("system.kernel", None),
])  # fmt: skip
def test_which_column_a_finding_marks(fact: str, column: str | None) -> None:
    found = column_of(fact)
    assert (found.key if found else None) == column


def test_every_finding_path_of_a_headline_fact_has_its_column() -> None:
    """The paths the fleet really produces for the headline facts, not only those written above."""
    result = fleet(3, {3: lambda f: (
        f["gpu"].update(driver_version="610.1", cuda_version="13.2"),
        dists(f)["flashinfer-python"].update(version="0.5.0"),
        dists(f)["sglang"].update(version="0.5.7"),
        f["cuda"]["toolkit"].update(nvcc="13.0.48"),
    )})
    columns = {f.fact: column_of(f.fact) for f in result.findings}
    assert {c.key for c in columns.values() if c} >= {"driver", "cuda", "nvcc", "flashinfer", "sglang"}
    assert [c.key for c in COLUMNS][:3] == ["driver", "cuda", "nvcc"]
