"""Cache diffs, read against the install times of the packages that fill the caches."""

from __future__ import annotations

import copy
from typing import Any

from driftwatch.diff import Severity

from driftwatch.explain import DiffResult, diff_snapshots
from driftwatch.model import ProbeRecord, ProbeStatus
from tests.diff.builders import INSTALLED, baseline, dists, make_snapshot

BUILT = INSTALLED + 3600  # the cache was built an hour after the install
REINSTALLED = INSTALLED + 86400 * 6  # 2026-02-25 10:00 UTC
OP = "0.4.1/90a/cached_ops/fused_moe_120"
FI = "~/.cache/flashinfer"


def entry(listed: dict[str, list[Any]], **extra: Any) -> dict[str, Any]:
    mtimes = [m for _, m in listed.values()]
    return {"owner": {"package": "flashinfer-python", "version": "0.4.1"}, "files": len(listed),
            "bytes": sum(s for s, _ in listed.values()), "oldest": min(mtimes), "newest": max(mtimes),
            "digest": str(sorted(listed.items())), "objects": listed, "object_count": len(listed),
            "symlinks": 0, "unreadable": 0, "first_unreadable": None, "truncated": None,
            "volatile": {"dirs": {"0.4.1": "k"}}, **extra}


def caches(entries: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"caches": {FI: {"path": "/root/.cache/flashinfer", "layout": "flashinfer", "via": [], "exists": True,
                            "error": None, "truncated": None, "same_as": None, "entries": entries, **extra}},
            "locations_error": None, "volatile": {"walked": 1, "reused": 0, "visited": 80}}


def objects65(mtime: float = BUILT) -> dict[str, list[Any]]:
    return {f"{OP}/kernel_{i}.cuda.o": [1000 + i, mtime] for i in range(64)} | {f"{OP}/fused_moe_120.so": [9000, mtime]}


def diff(old_caches: dict[str, Any], new_caches: dict[str, Any], reinstall: dict[str, Any] | None = None) -> DiffResult:
    new = baseline()
    if reinstall is not None:
        dists(new)["flashinfer-python"].update(reinstall)
    old_snap = make_snapshot(caches=old_caches)
    return diff_snapshots(old_snap, make_snapshot(minutes=60, python=new["python"], caches=new_caches))


def test_same_version_reinstall_with_five_of_65_objects_rebuilt_names_the_cache_first() -> None:
    rebuilt = objects65()
    for i in range(5):
        rebuilt[f"{OP}/kernel_{i}.cuda.o"] = [2000 + i, REINSTALLED + 60]
    result = diff(caches({"0.4.1": entry(objects65())}), caches({"0.4.1": entry(rebuilt)}),
                  {"installed_at": REINSTALLED, "record_sha256": "rec-rebuilt"})
    first = result.changes[0]
    assert (first.category, first.item, first.severity) == ("file", f"{FI}/0.4.1", Severity.high)
    assert first.explanation.startswith(
        f"{FI}/0.4.1: 5 of 65 objects changed (newest 2026-02-25 10:01 UTC) while flashinfer-python 0.4.1 was "
        "reinstalled (installed 2026-02-25 10:00 UTC): 60 of 65 objects predate that install")
    # doctor's stale-compile-cache rule names the state and the directory to clear.
    assert "known-bad state (predicted)" in first.explanation and "Fix: rm -rf " in first.explanation
    assert result.changes[1].item == "flashinfer-python"  # the reinstall itself, ranked below


def test_unchanged_entry_under_a_reinstall_is_stale() -> None:
    same = caches({"0.4.1": entry(objects65())})
    result = diff(same, copy.deepcopy(same), {"installed_at": REINSTALLED, "record_sha256": "rec-rebuilt"})
    first = result.changes[0]
    assert (first.item, first.severity, first.context) == (f"{FI}/0.4.1", Severity.high, False)
    assert first.explanation.startswith(
        f"{FI}/0.4.1 unchanged (65 files, 65 objects, newest 2026-02-19 11:00 UTC) while flashinfer-python 0.4.1 "
        "was reinstalled (installed 2026-02-25 10:00 UTC): every cached object predates that install")
    assert "known-bad state (predicted)" in first.explanation


def test_reinstall_with_identical_files_makes_the_old_objects_context() -> None:
    same = caches({"0.4.1": entry(objects65())})
    result = diff(same, copy.deepcopy(same), {"installed_at": REINSTALLED})
    stale = next(c for c in result.changes if c.item == f"{FI}/0.4.1")
    assert stale.severity is Severity.info and "(installed 2026-02-25 10:00 UTC, identical files)" in stale.explanation
    assert stale.context and not result.drift  # the reinstall is context too: nothing that runs changed
    assert result.problems == []  # nor a known-bad state that would exit 2 under "no drift"


def test_entry_of_another_version_is_not_stale_when_this_one_is_upgraded() -> None:
    old_entry = entry(objects65())
    same = caches({"0.4.1": old_entry})
    result = diff(same, copy.deepcopy(same), {"version": "0.4.2", "installed_at": REINSTALLED})
    assert all(c.item != f"{FI}/0.4.1" for c in result.changes)


def test_entry_built_after_the_reinstall_is_not_stale() -> None:
    same = caches({"0.4.1": entry(objects65(mtime=REINSTALLED + 10))})
    result = diff(same, copy.deepcopy(same), {"installed_at": REINSTALLED, "record_sha256": "x"})
    assert all(c.category != "file" for c in result.changes)


def test_rebuild_without_a_reinstall_is_medium_and_additions_low() -> None:
    rebuilt = objects65()
    rebuilt[f"{OP}/kernel_3.cuda.o"] = [1, BUILT + 5]
    change = diff(caches({"0.4.1": entry(objects65())}), caches({"0.4.1": entry(rebuilt)})).changes[0]
    assert change.severity is Severity.medium and "1 of 65 objects changed" in change.explanation
    grown = objects65() | {f"{OP}/extra.so": [5, BUILT + 9]}
    change = diff(caches({"0.4.1": entry(objects65())}), caches({"0.4.1": entry(grown)})).changes[0]
    assert change.severity is Severity.low and change.explanation.startswith(f"{FI}/0.4.1: 1 added (newest")


def test_new_removed_and_gone() -> None:
    result = diff(caches({"0.4.1": entry(objects65())}), caches({"0.4.2": entry(objects65())}))
    texts = sorted(c.explanation for c in result.changes)
    assert texts == [f"{FI}/0.4.1 was removed (had 65 files, 65 objects)",
                     f"{FI}/0.4.2 is new (65 files, 65 objects, newest 2026-02-19 11:00 UTC)"]
    gone = diff(caches({"0.4.1": entry(objects65())}), caches({}, exists=False)).changes
    assert [c.explanation for c in gone] == [f"{FI} is gone (had 1 entry): what it cached is rebuilt on next use"]


def test_without_object_lists_counts_and_sizes_say_it() -> None:
    big_old = entry(objects65(), objects=None, object_count=9000, files=10000, bytes=2 << 30, digest="a")
    big_new = entry(objects65(), objects=None, object_count=9100, files=10250, bytes=(2 << 30) + (50 << 20), digest="b")
    change = diff(caches({"*": big_old}), caches({"*": big_new})).changes[0]
    assert change.explanation.startswith(f"{FI}/*: 10,000 → 10,250 files (2.0 GiB → 2.0 GiB) (newest")


def test_truncated_listing_compares_nothing_but_says_so() -> None:
    cut = entry(objects65(), truncated="time", digest="other")
    result = diff(caches({"0.4.1": entry(objects65())}, truncated=None),
                  caches({"0.4.1": cut}, truncated="time"))
    assert [c.explanation for c in result.changes] == [
        f"the listing of {FI} is cut short (time): entries it did not reach are not compared"]


def test_identical_caches_and_a_failed_python_probe_say_nothing() -> None:
    same = caches({"0.4.1": entry(objects65())})
    old_snap = make_snapshot(caches=same)
    new_snap = make_snapshot(minutes=60, caches=copy.deepcopy(same),
                             python=ProbeRecord(status=ProbeStatus.timeout, error="timed out"))
    assert all(c.category != "file" for c in diff_snapshots(old_snap, new_snap).changes)
