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
    from driftwatch.explain import diff_snapshots
    from tests.diff.builders import baseline, make_snapshot

    a, b = baseline(), baseline()
    repo(a).update(dirty=["x.py"], diff_sha256="d1")
    repo(b).update(dirty=["x.py"], diff_sha256="d2")
    assert (
        "edited again"
        in diff_snapshots(make_snapshot(**a), make_snapshot(**b)).changes[0].explanation
    )
    assert diff_snapshots(make_snapshot(**a), make_snapshot(**a)).changes == []


def test_a_moved_commit_is_one_finding_naming_what_it_moved() -> None:
    from tests.diff.builders import HEAD, SRT, baseline, dists, make_snapshot
    from driftwatch.explain import diff_snapshots

    new_head = "1a2b3c4" + "0" * 33

    def editable(f: dict[str, Any], head: str) -> None:
        dists(f)["sglang"].update(editable=True, direct_url="file:///root/sglang/python", source_commit=head)

    old = baseline()
    editable(old, HEAD)
    new = baseline()
    editable(new, new_head)
    repo(new).update(head=new_head, subject="Bump sgl-kernel")
    new["files"]["files"][f"{SRT}/server_args.py"].update(sha256="a" * 64, mtime=1.0)
    new["files"]["files"][f"{SRT}/managers/scheduler.py"].update(sha256="b" * 64, mtime=1.0)
    changes = diff_snapshots(make_snapshot(**old), make_snapshot(minutes=60, **new)).changes
    [commit] = changes  # not three findings repeating the same HEAD
    assert commit.category == "git" and (commit.old, commit.new) == ("9f1c2ab", "1a2b3c4")
    assert "it moved the editable install sglang and 2 watched files" in commit.explanation
    assert "python/sglang/srt/server_args.py" in commit.explanation


def test_a_file_edited_on_a_dirty_tree_stays_its_own_finding() -> None:
    from tests.diff.builders import SRT

    def edit(f: dict[str, Any]) -> None:
        repo(f).update(head="1a2b3c4" + "0" * 33, dirty=["python/sglang/srt/server_args.py"], diff_sha256="d1")
        f["files"]["files"][f"{SRT}/server_args.py"].update(sha256="a" * 64)

    items = sorted((c.category, c.item) for c in diff_after(edit).changes)
    assert ("file", f"{SRT}/server_args.py") in items
