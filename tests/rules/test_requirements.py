"""Unsatisfied requirements: pip check over the snapshot, torch-built natives named first."""

from __future__ import annotations

from typing import Any

from driftwatch.severity import Severity
from tests.diff.builders import dist
from tests.rules.builders import baseline, dists, found, make_snapshot, not_run

RULE = "unmet-requirement"


def with_dists(*add: dict[str, Any], **versions: str) -> dict[str, Any]:
    facts = baseline()
    for name, version in versions.items():
        dists(facts)[name.replace("_", "-")]["version"] = version
    for d in add:
        dists(facts)[d["name"]] = d
    return facts


def test_a_healthy_environment_has_no_finding() -> None:
    assert found(RULE, make_snapshot()) == []


def test_a_kernel_package_off_the_servers_pin() -> None:
    [finding] = found(RULE, make_snapshot(**with_dists(sgl_kernel="0.3.17")))
    assert finding.why.startswith("sglang 0.5.6 requires sgl-kernel==0.3.16.post4, but 0.3.17 is installed: ")
    assert "signatures of the pinned build" in finding.why and finding.severity is Severity.high
    assert finding.fix == "pip install 'sgl-kernel==0.3.16.post4' (what sglang 0.5.6 requires)"
    assert finding.subjects == (("package", "sglang"), ("package", "sgl-kernel"))
    assert finding.key == "python3: sglang → sgl-kernel"


def test_torch_moved_under_the_kernels_pinned_with_it_is_critical() -> None:
    # sglang pins torch==2.8.0 and sgl-kernel==0.3.16.post4 together; torch is now 2.9.0.
    [finding] = found(RULE, make_snapshot(**with_dists(torch="2.9.0+cu128")))
    assert finding.severity is Severity.critical
    assert finding.why == (
        "sglang 0.5.6 requires torch==2.8.0, but 2.9.0+cu128 is installed: sgl-kernel 0.3.16.post4 and "
        "flashinfer-python 0.4.1, pinned with it by sglang, are built against torch==2.8.0 and their native ops "
        "fail to load with `undefined symbol`"
    )
    assert ("package", "torch") in finding.subjects and ("package", "sgl-kernel") in finding.subjects
    assert finding.reference == "https://github.com/sgl-project/sglang/issues/5100"


def test_a_native_extension_pinning_torch_names_itself() -> None:
    vllm = dist("vllm", "0.10.1", "torch==2.8.0", "xformers==0.0.31")
    xformers = dist("xformers", "0.0.31", "torch==2.8.0")
    findings = {f.key: f for f in found(RULE, make_snapshot(**with_dists(vllm, xformers, torch="2.9.0")))}
    assert findings["python3: vllm → torch"].why.endswith(
        ": vllm and xformers 0.0.31 (pinned with it) are built against torch==2.8.0 and their native ops fail to "
        "load with `undefined symbol`"
    )
    assert findings["python3: xformers → torch"].severity is Severity.critical


def test_extras_count_between_focus_packages_only() -> None:
    sglang = dist("sglang", "0.5.6", 'sgl-kernel==0.3.16.post4; extra == "srt"', 'sgl-kernel==0.3.15; extra == "dev"')
    ipython = dist("ipython", "8.12.3", 'pytest<7.1; extra == "test"', 'numpy<2; extra == "all"')
    pytest_ = dist("pytest", "9.0.3")
    findings = found(RULE, make_snapshot(**with_dists(sglang, ipython, pytest_, sgl_kernel="0.3.17")))
    # sglang[srt]'s pin counts (both are focus packages, sgl-kernel is installed); a dev
    # extra and ipython's extras do not: nothing says anyone asked for them.
    assert [f.why.split(":")[0] for f in findings] == [
        "sglang 0.5.6 requires sgl-kernel==0.3.16.post4 (extra [srt]), but 0.3.17 is installed"
    ]


def test_platform_markers_count_only_on_a_known_architecture() -> None:
    torch = dist("torch", "2.8.0+cu128", 'triton==3.4.0; platform_machine == "x86_64"')
    facts = with_dists(torch)
    x86 = found(RULE, make_snapshot(**facts))  # the system NCCL lives in /usr/lib/x86_64-linux-gnu
    assert [f.why for f in x86] == ["torch 2.8.0+cu128 requires triton==3.4.0, but it is not installed"]
    assert x86[0].severity is Severity.high  # torch is a focus package
    facts["cuda"]["nccl"]["system"] = {}  # nothing tells the architecture any more
    assert found(RULE, make_snapshot(**facts)) == []


def test_python_version_markers_use_the_targets_interpreter() -> None:
    old_python = dist("transformers", "4.57.1", 'numpy<2; python_version < "3.10"', "requests")
    assert found(RULE, make_snapshot(**with_dists(old_python))) == []  # the target runs 3.12


def test_a_missing_dependency_of_an_ordinary_package_is_low() -> None:
    [finding] = found(RULE, make_snapshot(**with_dists(dist("rich", "13.0.0", "pygments>=2.13"))))
    assert finding.severity is Severity.low and finding.why == "rich 13.0.0 requires pygments>=2.13, but it is not installed"


def test_unreadable_metadata_is_no_evidence() -> None:
    odd = dist("odd", "1.0", "not a requirement ===", 'numpy>=1; python_version ~~ "3"', 42)  # type: ignore[arg-type]
    assert found(RULE, make_snapshot(**with_dists(odd, torch="not a version"))) == []


def test_without_readable_distributions_the_rule_says_nothing() -> None:
    facts = baseline()
    facts["python"]["interpreters"]["python3"] = {"executable": "/root/ml-env/bin/python3", "error": "No such file"}
    assert not_run(RULE, make_snapshot(**facts)) == "no interpreter's distributions could be read"


def test_everything_one_package_lacks_is_one_finding() -> None:
    # A fresh environment missing several of sglang's dependencies: one thing to fix.
    facts = with_dists()
    for name in ("transformers", "numpy"):
        dists(facts).pop(name)
    dists(facts)["sglang"]["requires"] += ["aiohttp", "tqdm"]
    [finding] = [f for f in found(RULE, make_snapshot(**facts)) if f.why.startswith("sglang")]
    assert finding.why == ("sglang 0.5.6 requires aiohttp, tqdm and transformers>=4.57, but none of them is "
                           "installed")
    assert finding.fix == "pip install 'aiohttp' 'tqdm' 'transformers>=4.57'"
    assert finding.severity is Severity.high and finding.key == "python3: sglang → missing"
    assert ("package", "tqdm") in finding.subjects and ("package", "sglang") in finding.subjects


def test_a_dependency_missing_on_top_of_others_is_a_new_known_bad_state() -> None:
    from driftwatch.explain import diff_snapshots

    before = with_dists()
    dists(before)["sglang"]["requires"] += ["aiohttp", "tqdm"]  # both missing in the good run
    after = with_dists()
    dists(after)["sglang"]["requires"] += ["aiohttp", "tqdm"]
    dists(after).pop("transformers")  # now a third one is missing
    result = diff_snapshots(make_snapshot(**before), make_snapshot(minutes=5, **after))
    [state] = [f for f in result.findings if f.rule == RULE]
    assert "transformers>=4.57" in state.why
    assert result.changes[0].item == "transformers" and "known-bad state" in result.changes[0].explanation


def test_fewer_missing_dependencies_than_the_baseline_is_no_new_known_bad_state() -> None:
    # The good run lacked two of sglang's dependencies; one was installed since. The one
    # still missing was missing then too: nothing new is known-bad, whatever the grouping.
    from driftwatch.explain import diff_snapshots

    before = with_dists()
    dists(before)["sglang"]["requires"] += ["aiohttp", "tqdm"]
    after = with_dists(dist("aiohttp", "3.12.0"))
    dists(after)["sglang"]["requires"] += ["aiohttp", "tqdm"]
    result = diff_snapshots(make_snapshot(**before), make_snapshot(minutes=5, **after))
    assert [f for f in result.findings if f.rule == RULE] == []
    assert not any("known-bad state (" in c.explanation for c in result.changes)
