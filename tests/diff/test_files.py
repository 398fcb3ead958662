from __future__ import annotations

from driftwatch.diff import Severity
from tests.diff.builders import SRT, baseline, diff_after

ARGS = f"{SRT}/server_args.py"


def test_edited_and_reverted_is_info_content_identical() -> None:
    change = diff_after(lambda f: f["files"]["files"][ARGS].update(mtime=1772028120.0)).changes[0]
    assert (change.category, change.item, change.severity) == ("file", ARGS, Severity.info)
    assert "edited and reverted, or touched — content identical" in change.explanation
    assert change.new == "2026-02-25 14:02 UTC"


def test_edited_and_left_is_medium() -> None:
    change = diff_after(
        lambda f: f["files"]["files"][ARGS].update(sha256="f" * 64, size=1040, mtime=1772028120.0)
    ).changes[0]
    assert (change.severity, change.old, change.new) == (Severity.medium, "0" * 12, "f" * 12)
    assert (
        "edited, content differs" in change.explanation
        and "modified 2026-02-25 14:02 UTC" in change.explanation
    )


def test_added_and_removed_files() -> None:
    def edit(f: dict) -> None:  # type: ignore[type-arg]
        files = f["files"]["files"]
        files.pop(ARGS)
        files[f"{SRT}/notes.txt"] = {
            "size": 3,
            "mtime": 1.0,
            "mode": "0644",
            "sha256": "a" * 64,
            "error": None,
        }

    got = {c.item: (c.severity, c.old is None) for c in diff_after(edit).changes}
    assert got == {ARGS: (Severity.medium, False), f"{SRT}/notes.txt": (Severity.low, True)}


def test_unhashed_file_says_so() -> None:
    def edit(f: dict) -> None:  # type: ignore[type-arg]
        f["files"]["files"][ARGS].update(sha256=None, error="not hashed: too large")

    change = diff_after(edit).changes[0]
    assert change.severity is Severity.low and "too large" in change.explanation


def test_a_file_left_unhashed_for_time_is_no_change_unless_its_stat_moved() -> None:
    # The walk ran out of time before this file (a slow mount, big files ahead of it):
    # nothing is known of its content, and nothing may be claimed about it.
    unhashed = {"sha256": None, "error": "not hashed: out of time"}
    assert diff_after(lambda f: f["files"]["files"][ARGS].update(unhashed)).changes == []
    [change] = diff_after(lambda f: f["files"]["files"][ARGS].update(unhashed, mtime=1772028120.0)).changes
    assert change.severity is Severity.low
    assert change.explanation.endswith("but its content is unknown (not hashed: out of time)"), change.explanation


def test_times_within_one_minute_are_shown_to_the_second() -> None:
    # Baseline mtime is INSTALLED (10:00:00); touched 7 s later: "10:00 → 10:00" says nothing.
    from tests.diff.builders import INSTALLED

    change = diff_after(lambda f: f["files"]["files"][ARGS].update(mtime=INSTALLED + 7)).changes[0]
    assert (change.old, change.new) == ("2026-02-19 10:00:00 UTC", "2026-02-19 10:00:07 UTC")
    assert "10:00:00 UTC → 2026-02-19 10:00:07 UTC" in change.explanation


def test_a_truncated_walk_does_not_report_unlisted_files_as_removed() -> None:
    def edit(f: dict) -> None:  # type: ignore[type-arg]
        facts = f["files"]
        facts.update(truncated=True, truncated_reason="more files matched than max_files = 1")
        kept = next(iter(facts["files"]))
        facts["files"] = {kept: facts["files"][kept]}

    changes = diff_after(edit).changes
    assert [c.severity for c in changes] == [Severity.info, Severity.info]
    assert "truncated (more files matched than max_files = 1)" in changes[0].explanation
    assert changes[1].explanation == (
        "2 files listed on one side only not compared (the new walk stopped early: more files matched than max_files = 1)"
    )
    assert not any("deleted" in c.explanation for c in changes)


def test_a_touch_within_the_second_says_what_differs() -> None:
    """Copied onto another host by a tool that kept whole seconds: the times differ below the second."""
    mtime = baseline()["files"]["files"][ARGS]["mtime"]  # 2026-02-19 10:00:00 UTC
    change = diff_after(lambda f: f["files"]["files"][ARGS].update(mtime=mtime + 0.482)).changes[0]
    assert change.explanation.endswith("(mtime 2026-02-19 10:00:00.000 UTC → 2026-02-19 10:00:00.482 UTC)")
    assert (change.old, change.new) == ("2026-02-19 10:00:00.000 UTC", "2026-02-19 10:00:00.482 UTC")


def test_mtimes_that_read_the_same_to_the_microsecond_are_no_change() -> None:
    mtime = baseline()["files"]["files"][ARGS]["mtime"]
    jitter = mtime + 3e-7  # the next float up: another value, the same microsecond
    assert jitter != mtime
    assert diff_after(lambda f: f["files"]["files"][ARGS].update(mtime=jitter)).changes == []


def test_two_users_homes_compare_the_same_files_under_home() -> None:
    # A cross-host diff, root's host against ubuntu's: ~/sglang is the same tree.
    from driftwatch.explain import diff_snapshots
    from tests.diff.builders import make_snapshot

    old, new = baseline(), baseline()
    old["files"]["home"], new["files"]["home"] = "/root", "/home/ubuntu"
    new["files"]["files"] = {p.replace("/root/", "/home/ubuntu/", 1): e for p, e in new["files"]["files"].items()}
    new["files"]["files"][ARGS.replace("/root/", "/home/ubuntu/")]["sha256"] = "f" * 64
    files = [c for c in diff_snapshots(make_snapshot(**old), make_snapshot(host="gpu02", **new)).changes
             if c.category == "file"]
    assert [c.item for c in files] == ["~/sglang/python/sglang/srt/server_args.py"], [c.explanation for c in files]
    assert "edited, content differs" in files[0].explanation
