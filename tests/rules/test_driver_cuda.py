"""Driver vs CUDA builds: the driver's CUDA version against torch's, the CUDA wheels' and
kernel packages' builds; green contexts against the driver."""

from __future__ import annotations

from driftwatch.model import ProbeStatus
from driftwatch.severity import Severity
from tests.diff.builders import failed
from tests.rules.builders import baseline, dists, found, make_snapshot, not_run

RULE, GREEN = "driver-below-cuda-build", "green-contexts-need-driver"


def driver(version: str, cuda: str) -> dict:
    facts = baseline()
    facts["gpu"].update(driver_version=version, cuda_version=cuda)
    return facts


def test_a_driver_for_an_older_cuda_minor_than_torch_is_high() -> None:
    # R535 supports CUDA 12.2; torch 2.8.0+cu128 is built for 12.8.
    [finding] = found(RULE, make_snapshot(**driver("535.104.05", "12.2")))
    assert finding.severity is Severity.high and not finding.observed
    assert finding.why.startswith("the driver 535.104.05 supports CUDA 12.2, but torch 2.8.0+cu128 (CUDA 12.8)")
    assert "minor-version compatibility" in finding.why and "unsupported toolchain" in finding.why
    assert "upgrade the NVIDIA driver to one for CUDA 12.8" in finding.fix
    assert ("cuda", "torch (python3)") in finding.subjects and ("driver", "driver") in finding.subjects


def test_a_build_for_a_newer_cuda_major_cannot_initialise() -> None:
    facts = driver("570.133.20", "12.8")
    facts["cuda"]["torch"]["python3"].update(version="2.10.0+cu130", cuda="13.0")
    dists(facts)["torch"]["version"] = "2.10.0+cu130"
    dists(facts)["vllm"] = {**dists(facts)["numpy"], "name": "vllm", "version": "0.11.0+cu130"}
    dists(facts)["nvidia-cuda-runtime"] = {**dists(facts)["numpy"], "name": "nvidia-cuda-runtime", "version": "13.0.96"}
    [finding] = found(RULE, make_snapshot(**facts))
    assert finding.severity is Severity.critical and "CUDA cannot initialise" in finding.why
    assert "vllm 0.11.0+cu130 (CUDA 13.0)" in finding.why and "nvidia-cuda-runtime 13.0.96 (CUDA 13.0)" in finding.why
    assert ("package", "vllm") in finding.subjects and ("package", "nvidia-cuda-runtime") in finding.subjects


def test_cuda_wheels_need_at_least_their_major() -> None:
    facts = driver("535.104.05", "12.2")
    facts["cuda"]["torch"]["python3"] = {"error": "timed out"}  # torch's build unknown: the wheels still speak
    dists(facts)["nvidia-nccl-cu13"] = {**dists(facts)["numpy"], "name": "nvidia-nccl-cu13", "version": "2.28.9"}
    [finding] = found(RULE, make_snapshot(**facts))
    assert finding.severity is Severity.critical and "nvidia-nccl-cu13 2.28.9 (CUDA 13)" in finding.why
    assert ("nccl", "nvidia-nccl-cu13") in finding.subjects


def test_a_healthy_host_has_no_finding() -> None:
    assert found(RULE, make_snapshot()) == []  # driver for CUDA 13.1, torch for 12.8


def test_without_the_drivers_cuda_version_the_rule_says_nothing() -> None:
    assert "the gpu probe timeout" in not_run(RULE, make_snapshot(gpu=failed(ProbeStatus.timeout, "timed out after 10s")))
    assert "did not report the CUDA version" in not_run(RULE, make_snapshot(**driver("590.48.01", None)))  # type: ignore[arg-type]


def test_green_contexts_need_a_driver_for_cuda_12_4() -> None:
    [finding] = found(GREEN, make_snapshot(**driver("535.86.10", "12.2")))
    assert finding.severity is Severity.high and "undefined symbol: cuGreenCtxDestroy" in finding.why
    assert finding.why.startswith("sgl-kernel 0.3.16.post4 uses the driver's green-context API")
    assert finding.reference == "https://github.com/sgl-project/sglang/issues/8432"
    assert found(GREEN, make_snapshot(**driver("550.54.15", "12.4"))) == []
    assert "the gpu probe error" in not_run(GREEN, make_snapshot(gpu=failed(ProbeStatus.error, "nvidia-smi: not found")))
