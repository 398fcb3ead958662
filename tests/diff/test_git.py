from __future__ import annotations

from typing import Any

from driftwatch.diff import Severity
from tests.diff.builders import diff_after


def repo(f: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = f["git"]["repos"]["~/sglang"]
    return result


def test_head_moved_names_shas_and_subjects() -> None:
    def edit(f: dict[str, Any]) -> None:
        repo(f).update(
            head="1a2b3c4" + "0" * 33, subject="Bump sgl-kernel", describe="v0.5.6-13-g1a2b3c4"
        )

    change = diff_after(edit).changes[0]
    assert (change.old, change.new, change.severity) == ("9f1c2ab", "1a2b3c4", Severity.high)
    assert '"Fix radix cache eviction" → "Bump sgl-kernel"' in change.explanation


def test_dirty_then_clean_and_diff_digest() -> None:
    dirty = diff_after(
        lambda f: repo(f).update(dirty=["python/sglang/srt/server_args.py"], diff_sha256="d1")
    ).changes[0]
    assert (
        dirty.severity is Severity.medium
        and "uncommitted edits now: python/sglang/srt/server_args.py" in dirty.explanation
    )
    assert dirty.old == "clean"


def test_same_dirty_files_new_digest_is_edited_again() -> None:
    from driftwatch.diff import diff_snapshots
    from tests.diff.builders import baseline, make_snapshot

    a, b = baseline(), baseline()
    repo(a).update(dirty=["x.py"], diff_sha256="d1")
    repo(b).update(dirty=["x.py"], diff_sha256="d2")
    assert (
        "edited again"
        in diff_snapshots(make_snapshot(**a), make_snapshot(**b)).changes[0].explanation
    )
    assert diff_snapshots(make_snapshot(**a), make_snapshot(**a)).changes == []
