"""The rulebook as a whole: never a crash, never a finding from missing facts."""

from __future__ import annotations

import subprocess
import sys

from driftwatch.model import ProbeRecord, ProbeStatus
from driftwatch.rules.registry import RULES, diagnose
from tests.diff.builders import make_snapshot


def test_rule_names_are_stable_identifiers() -> None:
    assert len(RULES) >= 19 and all(name == name.lower() and " " not in name for name in RULES)


def test_a_snapshot_without_facts_yields_only_reasons() -> None:
    empty = make_snapshot()
    empty.probes.clear()
    diagnosis = diagnose(empty)
    assert diagnosis.findings == [] and diagnosis.ran == frozenset()
    assert {n.rule for n in diagnosis.not_run} == set(RULES) and all(n.why for n in diagnosis.not_run)


def test_failed_probes_are_reasons_too() -> None:
    failed = make_snapshot(**{name: ProbeRecord(status=ProbeStatus.timeout, error="timed out after 10s")
                              for name in ("gpu", "cuda", "python", "processes", "logs")})
    diagnosis = diagnose(failed)
    assert diagnosis.findings == []
    assert any("the gpu probe timeout: timed out after 10s" == n.why for n in diagnosis.not_run)


def test_facts_of_another_shape_are_a_reason_not_a_crash() -> None:
    odd = make_snapshot(
        gpu={"driver_version": 590, "cuda_version": "13.1", "gpus": ["GPU-0"], "processes": "none"},
        python={"interpreters": {"python3": {"distributions": {"torch": "2.8.0"}, "version": 3}}},
        cuda={"torch": ["x"], "nccl": "2.27.3"},
        processes={"servers": {"x": {"env": ["NCCL_P2P_DISABLE=1"], "args": "tp"}}, "login_env": "NCCL_DEBUG=INFO"},
        logs={"logs": {"*.log": {"kind": "sglang", "memory": {"TP0": "21 GB"}, "errors": "none"}}},
    )
    diagnosis = diagnose(odd)
    assert diagnosis.problems == []
    assert len(diagnosis.ran) + len(diagnosis.not_run) == len(RULES)


def test_the_rules_the_diff_and_the_explanation_each_import_on_their_own() -> None:
    # Each layer imports in a fresh interpreter, in any order: none needs another half-imported.
    for module in ("driftwatch.rules.registry", "driftwatch.diff.engine", "driftwatch.explain"):
        done = subprocess.run([sys.executable, "-c", f"import {module}; from driftwatch.explain import diff_snapshots"],
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
