"""Stale compile caches: JIT objects older than their owner's install."""

from __future__ import annotations

from driftwatch.severity import Severity
from tests.diff.builders import INSTALLED, dists
from tests.rules.builders import baseline, found, make_snapshot, not_run
from tests.rules.stack import flashinfer_cache

BEFORE, AFTER = INSTALLED - 86400, INSTALLED + 3600


def objects(*mtimes: float) -> dict[str, list[float]]:
    return {f"0.4.1/121a/cached_ops/fused_moe_120/moe_kernel_{i}.cuda.o": [1000.0, t] for i, t in enumerate(mtimes)}


def test_objects_from_before_a_same_version_reinstall_are_stale() -> None:
    [finding] = found("stale-compile-cache", make_snapshot(caches=flashinfer_cache("0.4.1", objects(BEFORE, BEFORE, AFTER))))
    assert finding.severity is Severity.medium and not finding.observed
    assert finding.why.startswith("/root/.cache/flashinfer/0.4.1: 2 of 3 compiled objects predate the install of "
                                  "flashinfer-python 0.4.1 (2026-02-19 10:00 UTC)")
    assert finding.fix == "rm -rf /root/.cache/flashinfer/0.4.1 (it is rebuilt on next use)"
    assert finding.reference == "https://github.com/flashinfer-ai/flashinfer/issues/4489"
    assert ("file", "~/.cache/flashinfer/0.4.1") in finding.subjects and ("package", "flashinfer-python") in finding.subjects


def test_objects_built_after_the_install_or_for_another_version_are_not() -> None:
    assert found("stale-compile-cache", make_snapshot(caches=flashinfer_cache("0.4.1", objects(AFTER)))) == []
    assert found("stale-compile-cache", make_snapshot(caches=flashinfer_cache("0.3.0", objects(BEFORE)))) == []


def test_without_install_times_the_rule_says_nothing() -> None:
    facts = baseline()
    facts["python"]["interpreters"]["python3"] = {"error": "timed out"}
    assert "install times are unknown" in not_run("stale-compile-cache", make_snapshot(
        caches=flashinfer_cache("0.4.1", objects(BEFORE)), python=facts["python"]))
    assert not_run("stale-compile-cache", make_snapshot()) == "no caches facts in this snapshot"
    assert dists(baseline())["flashinfer-python"]["installed_at"] == INSTALLED
