"""The diff of two snapshots' server logs: new errors by kind (root cause first), readiness lost
with the log's own words, a KV cache that shrank, the version the log names."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from driftwatch.explain import diff_snapshots
from driftwatch.logparse import detect_and_parse
from tests.diff.builders import make_snapshot
from tests.seed import seed_log

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "server-logs"
GLOB = "/data/logs/*.log"


def logs(facts: dict[str, Any]) -> dict[str, Any]:
    return {"logs": {GLOB: {"path": "/data/logs/server.log", **facts}}}


def log_changes(old: dict[str, Any], new: dict[str, Any]) -> list[Any]:
    result = diff_snapshots(make_snapshot(logs=logs(old)), make_snapshot(minutes=60, logs=logs(new)))
    return [c for c in result.changes if c.category in ("log", "nccl")]


def test_failed_start_names_the_kv_budget_before_the_engine_failure() -> None:
    changes = log_changes(detect_and_parse(seed_log(0.88, fails=False)), detect_and_parse(seed_log(0.55, fails=True)))
    texts = [c.explanation for c in changes]
    assert texts[0] == ("new kv-budget error in /data/logs/server.log (8×): RuntimeError: Not enough memory. "
                        "Please try to increase --mem-fraction-static.")  # fmt: skip
    assert any("no longer reaches 'ready' (not ready: kv-budget error (8×)" in text for text in texts)
    assert sum("engine-start" in text for text in texts) == 2  # scheduler exception, child failed
    assert changes[0].item == "/data/logs/server.log: kv-budget (not_enough_memory)"


def test_same_kind_other_detail_is_new() -> None:
    old = detect_and_parse((FIXTURES / "vllm-0.7-max-seq-len-too-large.log").read_text())
    new = detect_and_parse((FIXTURES / "vllm-0.4-gpu-blocks-zero.log").read_text())
    items = [c.item for c in log_changes(old, new)]
    assert "/data/logs/server.log: kv-budget (zero_gpu_blocks)" in items
    assert not any("kv_cache_too_small" in item for item in items)  # gone, not new


def test_errors_stored_before_kinds_were_grouped_still_compare() -> None:
    old = {"errors": [{"kind": "not_enough_memory", "message": "RuntimeError: Not enough memory.", "count": 8}]}
    new = {"errors": [{"kind": "kv-budget", "detail": "not_enough_memory", "message": "RuntimeError: Not enough memory.",
                       "count": 8, "ranks": []}]}  # fmt: skip
    assert [c.item for c in log_changes(old, new)] == ["/data/logs/server.log: kv-budget (not_enough_memory)"]


def test_kv_cache_shrink_says_when_a_full_request_no_longer_fits() -> None:
    good = detect_and_parse(seed_log(0.88, fails=False))
    smaller = detect_and_parse(seed_log(0.88, fails=False).replace("161792", "101792"))
    [change] = [c for c in log_changes(good, smaller) if c.item.endswith("kv cache")]
    assert change.explanation == (
        "KV cache shrank from 161,792 to 101,792 tokens (-37%) in /data/logs/server.log: fewer concurrent requests fit; "
        "101,792 tokens < max seq len 163,840: one full-length request does not fit")


def test_the_version_the_log_names() -> None:
    old = detect_and_parse((FIXTURES / "vllm-v1-0.8.3-engine-dp.log").read_text())
    new = detect_and_parse((FIXTURES / "vllm-v1-0.8.4-engine-tp2.log").read_text())
    [change] = [c for c in log_changes(old, new) if c.item.endswith("version")]
    assert (change.old, change.new) == ("0.8.3", "0.8.4")
    assert change.explanation == "vLLM 0.8.3 → 0.8.4, as its log in /data/logs/server.log says"


def test_identical_logs_are_no_change() -> None:
    facts = detect_and_parse(seed_log(0.55, fails=True))
    assert log_changes(facts, facts) == []
