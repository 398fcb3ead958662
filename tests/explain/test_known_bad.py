"""Rank by evidence: a change that produced a known-bad state says so and ranks first,
above decoys that merely changed (a dozen package bumps, a touched file, a new process)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from driftwatch.cron.alerts import fingerprint
from driftwatch.explain import diff_snapshots
from driftwatch.diff.change import Change
from driftwatch.explain.known_bad import apply_findings
from driftwatch.rules.finding import Diagnosis, Finding
from driftwatch.severity import Severity
from tests.diff.builders import GPU0, GPU1, SRT, baseline, dist, dists, make_snapshot
from tests.rules.builders import SGLANG, logs, processes, server
from tests.seed import seed_log

Facts = dict[str, Any]
BUMPED = [f"lib{c}" for c in "abcdefghijkl"]


def good() -> Facts:
    facts = baseline()
    for name in BUMPED:
        dists(facts)[name] = dist(name, "1.0.0")
    facts["processes"] = processes(server(*SGLANG, "--tp", "1", env={"NCCL_DEBUG": "INFO"}))
    facts["logs"] = logs(seed_log(0.88, fails=False))
    return facts


def decoys(facts: Facts) -> None:
    for name in BUMPED:
        dists(facts)[name]["version"] = "1.1.0"
    facts["files"]["files"][f"{SRT}/server_args.py"]["mtime"] += 3600  # touched, same content
    facts["gpu"]["processes"][f"{GPU1}:5555"] = {"gpu_uuid": GPU1, "pid": 5555, "name": "/usr/bin/jupyter", "used_mib": 3072}


def sgl_kernel_off_pin(f: Facts) -> None:
    dists(f)["sgl-kernel"]["version"] = "0.3.17"


def torch_under_its_kernels(f: Facts) -> None:
    dists(f)["torch"]["version"] = "2.9.0+cu128"


def p2p_disabled(f: Facts) -> None:
    f["processes"]["servers"]["sglang.launch_server"]["env"]["NCCL_P2P_DISABLE"] = "1"


def deadlocking_nccl(f: Facts) -> None:
    dists(f)["nvidia-nccl-cu12"]["version"] = "2.21.5"
    f["cuda"]["nccl"]["distributions"]["nvidia-nccl-cu12"] = "2.21.5"


def memhog_on_the_servers_gpu(f: Facts) -> None:
    f["gpu"]["processes"][f"{GPU0}:10291"] = {"gpu_uuid": GPU0, "pid": 10291, "name": "/root/tools/memhog", "used_mib": 2048}


def fraction_lowered(f: Facts) -> None:
    f["processes"]["servers"]["sglang.launch_server"] = server(*SGLANG, "--tp", "1", "--mem-fraction-static", "0.55",
                                                                env={"NCCL_DEBUG": "INFO"})


def driver_too_old(f: Facts) -> None:
    f["gpu"].update(driver_version="535.104.05", cuda_version="12.2")
    f["system"]["nvidia_modules"]["nvidia"] = "535.104.05"


def cuda_visible_devices_hides_gpus(f: Facts) -> None:
    f["processes"]["servers"]["sglang.launch_server"]["env"]["CUDA_VISIBLE_DEVICES"] = ""  # a wrapper's empty export


CAUSES: dict[str, tuple[Callable[[Facts], None], tuple[str, str]]] = {
    "sgl-kernel off sglang's pin": (sgl_kernel_off_pin, ("package", "sgl-kernel")),
    "torch moved under its kernels": (torch_under_its_kernels, ("package", "torch")),
    "NCCL_P2P_DISABLE=1": (p2p_disabled, ("env", "NCCL_P2P_DISABLE")),
    "NCCL 2.21.5": (deadlocking_nccl, ("nccl", "nvidia-nccl-cu12")),
    "memhog on the server's GPU": (memhog_on_the_servers_gpu, ("gpu-process", f"{GPU0}:10291")),
    "mem_fraction_static 0.55": (fraction_lowered, ("launch-arg", "mem_fraction_static")),
    "driver older than torch's CUDA": (driver_too_old, ("driver", "driver")),
    "CUDA_VISIBLE_DEVICES below TP": (cuda_visible_devices_hides_gpus, ("env", "CUDA_VISIBLE_DEVICES")),
}


@pytest.mark.parametrize("cause", CAUSES)
def test_the_cause_ranks_first_among_decoys(cause: str) -> None:
    edit, key = CAUSES[cause]
    new = good()
    decoys(new)
    edit(new)
    result = diff_snapshots(make_snapshot(**good()), make_snapshot(minutes=60, **new))
    first = result.changes[0]
    assert (first.category, first.item) == key, [c.explanation for c in result.changes[:3]]
    assert "known-bad state (predicted)" in first.explanation and first.evidence > 0
    assert result.findings and key in result.findings[0].subjects
    # Decoys stay: they are still changes, only ranked below the evidence.
    assert sum(c.item in BUMPED for c in result.changes) == len(BUMPED)


def test_a_state_the_baseline_already_had_is_not_new() -> None:
    old, new = good(), good()
    sgl_kernel_off_pin(old), sgl_kernel_off_pin(new)
    decoys(new)
    result = diff_snapshots(make_snapshot(**old), make_snapshot(minutes=60, **new))
    assert result.findings == [] and all(c.evidence == 0 for c in result.changes)


def test_a_worse_state_than_the_baselines_is_new_and_changes_the_alert() -> None:
    # The baseline already broke a pin (a smaller problem); now torch moved under the kernels.
    old, new = good(), good()
    dists(old)["transformers"]["version"] = "4.56.0"  # sglang wants >=4.57: high
    dists(new)["transformers"]["version"] = "4.56.0"
    torch_under_its_kernels(new)
    result = diff_snapshots(make_snapshot(**old), make_snapshot(minutes=60, **new))
    # The worse state is new (critical); torch 2.9's conv3d dispatch note comes with the upgrade too.
    assert [(f.rule, f.severity) for f in result.problems][0] == ("unmet-requirement", Severity.critical)
    assert all(f.rule != "unmet-requirement" or f.severity is Severity.critical for f in result.problems)
    assert fingerprint(result.drift_changes, result.problems) != fingerprint(result.drift_changes)


def test_a_known_bad_state_with_no_change_of_its_own_gets_a_line() -> None:
    # The link state is the same; only the GPU got busy (a volatile reading): PCIe gen 3 of 5 under load.
    old, new = good(), good()
    old["gpu"]["gpus"][GPU0]["pcie_gen"] = new["gpu"]["gpus"][GPU0]["pcie_gen"] = 3
    new["gpu"]["gpus"][GPU0]["volatile"]["utilization_gpu_pct"] = 97
    result = diff_snapshots(make_snapshot(**old), make_snapshot(minutes=60, **new))
    [line] = result.changes
    assert (line.category, line.item, line.rule) == ("gpu", GPU0, "pcie-link-degraded")
    assert (line.old, line.new) == (None, None)  # a GPU has no one value: unknown on both sides, one type
    assert line.explanation.startswith("known-bad state (observed): GPU 0 (H200, 00000000:83:00.0) runs its PCIe link at gen 3 of 5")
    back = diff_snapshots(make_snapshot(**new), make_snapshot(minutes=60, **old))
    assert [(c.old, c.new, c.rule) for c in back.changes] == [(None, None, "pcie-link-degraded")]
    assert back.changes[0].explanation.startswith("known-bad state gone: ")


def test_a_line_of_its_own_carries_the_facts_values_and_the_rule_apart() -> None:
    # The good run's server is gone (no argv), its log auto-detected 0.88; now a server runs with
    # --mem-fraction-static 0.55. The diff compares no argv, so the budget rule's line stands alone.
    old, new = good(), good()
    old["processes"]["servers"] = {}
    fraction_lowered(new)
    result = diff_snapshots(make_snapshot(**old), make_snapshot(minutes=60, **new))
    [line] = [c for c in result.changes if c.item == "mem_fraction_static"]
    assert line.to_json()["rule"] == "kv-budget-sglang"
    assert (line.to_json()["old"], line.to_json()["new"]) == (0.88, 0.55)


def test_a_context_change_is_never_tied() -> None:
    old, new = good(), good()
    dists(new)["sgl-kernel"]["installed_at"] += 60  # reinstalled with identical files
    result = diff_snapshots(make_snapshot(**old), make_snapshot(minutes=60, **new))
    assert [c.context for c in result.changes] == [True] and "known-bad" not in result.changes[0].explanation


def test_a_state_two_changes_made_together_is_said_once_in_full() -> None:
    old, new = good(), good()
    torch_under_its_kernels(new)
    dists(new)["flashinfer-python"]["record_sha256"] = "rebuilt"  # pinned with torch by sglang, rebuilt too
    result = diff_snapshots(make_snapshot(**old), make_snapshot(minutes=60, **new))
    torch, flashinfer = (next(c for c in result.changes if c.item == name) for name in ("torch", "flashinfer-python"))
    assert result.changes[0] is torch and "known-bad state (predicted): sglang 0.5.6 requires torch==2.8.0" in torch.explanation
    assert flashinfer.explanation.endswith("— known-bad state (predicted) unmet-requirement, as above")
    assert flashinfer.evidence == torch.evidence  # both made it: both rank with the evidence


def test_a_line_that_already_describes_the_state_gets_only_the_verdict_and_the_fix() -> None:
    state = Finding(Severity.high, "libnccl.so.2 is installed by a and b: a's copy loads", "pip uninstall b", "https://x",
                    subjects=(("package", "b"), ("nccl", "nvidia/nccl/lib/libnccl.so.2")), key="k", observed=True,
                    rule="file-two-owners", restates=(("nccl", "nvidia/nccl/lib/libnccl.so.2"),))
    cause = Change("package", "b", None, "2.30.7", Severity.low, "b 2.30.7 newly installed")
    line = Change("nccl", "nvidia/nccl/lib/libnccl.so.2", None, "a", Severity.high, "libnccl.so.2 is installed by a and b")
    said, new = apply_findings([cause, line], Diagnosis([], ran=frozenset({"file-two-owners"})),
                               Diagnosis([state], ran=frozenset({"file-two-owners"})))
    assert said[0].explanation == "b 2.30.7 newly installed — known-bad state (observed): " + state.why + ". Fix: pip uninstall b"
    assert said[1].explanation == "libnccl.so.2 is installed by a and b — known-bad state (observed). Fix: pip uninstall b"
    assert new == [state] and said[0].severity is Severity.high and said[0].evidence == said[1].evidence
