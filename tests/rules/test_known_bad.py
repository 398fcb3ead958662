"""Known-bad versions: the shipped data file and the config's [[rules]]."""

from __future__ import annotations

from typing import Any

from driftwatch.config import parse_config
from driftwatch.rules.host import RuleOptions
from driftwatch.severity import Severity
from tests.diff.builders import dist
from tests.rules.builders import SGLANG, baseline, dists, found, logs, make_snapshot, not_run, processes, server

RULE = "known-bad-version"


def nccl(version: str, facts: dict[str, Any] | None = None) -> dict[str, Any]:
    facts = facts or baseline()
    dists(facts)["nvidia-nccl-cu12"]["version"] = version
    facts["cuda"]["nccl"]["distributions"]["nvidia-nccl-cu12"] = version
    return facts


def problems(snapshot: Any, options: RuleOptions | None = None) -> list[Any]:
    return [f for f in found(RULE, snapshot, options) if f.severity is not Severity.info]


def test_the_nccl_cuda_graph_deadlock_release() -> None:
    [finding] = problems(make_snapshot(**nccl("2.21.5")))
    assert finding.severity is Severity.high and finding.why.startswith("nvidia-nccl-cu12 2.21.5: NCCL 2.21.5 can deadlock")
    assert finding.reference == "https://github.com/sgl-project/sglang/issues/7602"
    assert ("nccl", "nvidia-nccl-cu12") in finding.subjects and ("package", "nvidia-nccl-cu12") in finding.subjects
    assert problems(make_snapshot()) == []  # 2.27.3


def test_the_aarch64_proxy_leak_only_on_aarch64() -> None:
    arm = nccl("2.28.9")
    arm["cuda"]["nccl"]["system"] = {"/usr/lib/aarch64-linux-gnu/libnccl.so.2.28.9": "2.28.9"}
    [finding] = problems(make_snapshot(**arm))
    assert "leaks proxy-op slots on aarch64" in finding.why and finding.reference.endswith("NVIDIA/nccl/issues/2353")
    assert problems(make_snapshot(**nccl("2.28.9"))) == []  # x86_64 (the system NCCL's path says so)
    unknown = nccl("2.28.9")
    unknown["cuda"]["nccl"]["system"] = {}
    assert problems(make_snapshot(**unknown)) == []  # the architecture is unknown: no claim
    assert problems(make_snapshot(**nccl("2.29.3", arm))) == []


def test_the_version_a_server_logged_is_what_loaded() -> None:
    log = logs("[2026-02-19 10:00:01 TP0] NCCL version 2.21.5+cuda12.4\n")
    [finding] = problems(make_snapshot(logs=log))
    assert "libnccl 2.21.5+cuda12.4 (loaded, per /data/logs/server.log)" in finding.why
    assert ("nccl", "/data/logs/server.log") in finding.subjects


def test_a_system_nccl_counts_only_where_no_wheel_brings_one() -> None:
    facts = baseline()
    facts["cuda"]["nccl"]["system"] = {"/usr/lib/x86_64-linux-gnu/libnccl.so.2.21.5": "2.21.5"}
    assert problems(make_snapshot(**facts)) == []  # torch loads its nvidia-nccl-cu12 2.27.3
    del dists(facts)["nvidia-nccl-cu12"]
    [finding] = problems(make_snapshot(**facts))
    assert finding.subjects == (("nccl", "libnccl (system)"),)


def test_triton_2_3_0_only_with_torch_2_3_0() -> None:
    facts = baseline()
    dists(facts)["torch"]["version"] = "2.3.0"
    dists(facts)["triton"] = dist("triton", "2.3.0")
    [finding] = problems(make_snapshot(**facts))
    assert finding.severity is Severity.medium and "FP8" in finding.why and finding.reference.endswith("vllm/issues/4509")
    dists(facts)["torch"]["version"] = "2.3.1"
    assert problems(make_snapshot(**facts)) == []


def test_the_cumem_default_is_a_note_unless_the_variable_is_set() -> None:
    [note] = found(RULE, make_snapshot(**nccl("2.19.3")))
    assert note.severity is Severity.info and "NCCL_CUMEM_ENABLE" in note.why
    chosen = make_snapshot(processes=processes(server(*SGLANG, env={"NCCL_CUMEM_ENABLE": "0"})), **nccl("2.19.3"))
    assert found(RULE, chosen) == []
    assert found(RULE, make_snapshot()) == []  # 2.27.3: long past the change


def test_users_add_their_own_ranges_in_the_config() -> None:
    config = parse_config(
        '[[rules]]\npackage = "flashinfer_python"\nversions = ">=0.4,<0.4.2"\nseverity = "high"\n'
        'message = "our MLA decode regression"\nreference = "https://wiki.example.com/incidents/42"\n'
    )
    [finding] = problems(make_snapshot(), RuleOptions.of(["sglang"], config.rules))
    assert finding.why == "flashinfer-python 0.4.1: our MLA decode regression"
    assert finding.fix == "install a flashinfer-python version outside >=0.4,<0.4.2"


def test_without_versions_the_rule_says_nothing() -> None:
    facts = baseline()
    facts["python"]["interpreters"]["python3"] = {"error": "timed out"}
    facts["cuda"]["nccl"] = {"distributions": {}, "system": {}}
    assert "no installed versions" in not_run(RULE, make_snapshot(**facts))


def torch_with_cudnn(torch: str, cudnn: str | None) -> dict[str, Any]:
    facts = baseline()
    dists(facts)["torch"]["version"] = torch
    if cudnn is not None:
        dists(facts)["nvidia-cudnn-cu12"] = dist("nvidia-cudnn-cu12", cudnn)
    return facts


def test_torch_2_9_conv3d_moves_off_cudnn_unless_cudnn_9_15() -> None:
    # pytorch/pytorch#166643: 2.9.0 disables cuDNN for bf16 conv3d; 2.9.1 re-enables it with cuDNN >= 9.15.
    # A note, never an alert: it bites conv3d models (video VAEs, 3D U-Nets), not every server.
    [finding] = notes(make_snapshot(**torch_with_cudnn("2.9.0+cu128", "9.10.2.21")))
    assert "conv3d" in finding.why and finding.reference == "https://github.com/pytorch/pytorch/issues/166643"
    [pinned] = notes(make_snapshot(**torch_with_cudnn("2.9.1+cu128", "9.10.2.21")))
    assert "with the cuDNN it pins (9.10)" in pinned.why and ("package", "torch") in pinned.subjects
    assert notes(make_snapshot(**torch_with_cudnn("2.9.1+cu128", "9.15.1.9"))) == []
    assert notes(make_snapshot(**torch_with_cudnn("2.8.0+cu128", "9.10.2.21"))) == []

    assert problems(make_snapshot(**torch_with_cudnn("2.9.0+cu128", "9.10.2.21"))) == []


def notes(snapshot: Any) -> list[Any]:
    return [f for f in found(RULE, snapshot) if f.severity is Severity.info]