"""The perf rules: figures below the published limits, a GPU below its siblings, and a
hardware slowdown during the run; each with its reference, none without its facts."""

from __future__ import annotations

from driftwatch.rules.finding import Diagnosis
from driftwatch.rules.perf import peak_of, peaks
from driftwatch.rules.registry import diagnose
from tests.diff.builders import make_snapshot
from tests.perf_builders import GPUS, perf_facts


def perf_rules(**kwargs: object) -> Diagnosis:
    return diagnose(make_snapshot(perf=perf_facts(**kwargs)))  # type: ignore[arg-type]


def found(diagnosis: Diagnosis, rule: str) -> list[str]:
    return [f.why for f in diagnosis.findings if f.rule == rule]


def test_a_healthy_h200_host_has_no_perf_finding() -> None:
    diagnosis = perf_rules()
    assert [f for f in diagnosis.findings if f.rule.startswith("perf-")] == []
    assert {"perf-below-peak", "perf-gpu-below-siblings", "perf-hardware-slowdown", "perf-all-reduce-below-nvlink"} <= diagnosis.ran


def test_every_model_has_its_source_and_nvidia_smis_names_match() -> None:
    models, pcie, source = peaks()
    assert all(m.source.startswith("https://") for m in models) and source.startswith("https://pcisig.com/")
    assert pcie[5] == 63.0
    assert peak_of("NVIDIA H100 80GB HBM3").model == "H100 SXM5"  # type: ignore[union-attr]
    assert peak_of("NVIDIA H200").hbm_gb_s == 4800  # type: ignore[union-attr]
    assert peak_of("NVIDIA H100 PCIe").model == "H100 PCIe"  # type: ignore[union-attr]
    assert peak_of("NVIDIA GeForce RTX 2080 SUPER") is None


def test_a_gemm_below_six_tenths_of_the_peak() -> None:
    diagnosis = perf_rules(scale={i: 0.5 for i in range(8)})
    whys = found(diagnosis, "perf-below-peak")
    assert "bf16 GEMM on GPU 0 (H200, 00000000:18:00.0) measured 399 TFLOP/s: 40% of the published dense bf16 peak " \
           "(989.4), below 60%" in whys
    finding = next(f for f in diagnosis.findings if f.rule == "perf-below-peak")
    assert finding.observed and finding.reference.startswith("https://www.nvidia.com/en-us/data-center/h200/")


def test_a_link_below_three_quarters_of_pcie_gen5() -> None:
    facts = perf_facts()
    facts["gpus"][GPUS[6]]["figures"]["h2d"]["value"] = 6.9  # a link trained down to Gen2
    whys = found(diagnose(make_snapshot(perf=facts)), "perf-below-peak")
    assert whys == ["host-to-device copy on GPU 6 (H200, 00000000:78:00.0) measured 6.9 GB/s: 11% of its Gen5 x16 link "
                    "per direction (63), below 75%"]


def test_a_gpu_below_its_siblings() -> None:
    whys = found(perf_rules(scale={3: 0.9}), "perf-gpu-below-siblings")
    assert whys[0].startswith("bf16 GEMM on GPU 3 (H200, 00000000:48:00.0) is 10% below its siblings (718 vs a median "
                              "of 798 TFLOP/s)")
    assert len(whys) == 5


def test_a_power_brake_during_the_run() -> None:
    diagnosis = perf_rules(throttle={1: {"HW_POWER_BRAKE_SLOWDOWN": 0.4, "SW_POWER_CAP": 1.0}})
    assert found(diagnosis, "perf-hardware-slowdown") == [
        "GPU 1 (H200, 00000000:28:00.0) slowed itself down during the perf run: HW_POWER_BRAKE_SLOWDOWN (40% of the samples)"]
    # A GPU at its power limit under a full GEMM is how it should run: no finding.
    assert found(perf_rules(throttle={1: {"SW_POWER_CAP": 1.0}}), "perf-hardware-slowdown") == []


def test_an_all_reduce_far_below_nvlink() -> None:
    whys = found(perf_rules(busbw=120.0), "perf-all-reduce-below-nvlink")
    assert whys and whys[0].startswith("NCCL all-reduce busbw over 8 H200 SXM GPUs measured 120 GB/s: 27% of NVLink's 450")


def test_without_perf_facts_the_rules_do_not_run() -> None:
    diagnosis = diagnose(make_snapshot())
    not_run = {n.rule: n.why for n in diagnosis.not_run}
    assert not_run["perf-below-peak"] == "no perf facts in this snapshot"
    refused = perf_rules(gpu_status="refused", reason="GPU 3 busy")
    assert "perf-below-peak" not in refused.ran
