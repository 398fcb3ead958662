"""`history --html`: a timeline, oldest first, each step with when it was seen and its
changes ranked and grouped as diff groups them."""

from __future__ import annotations

import copy

from driftwatch.diff import DiffOptions
from driftwatch.history import HistoryQuery, walk_history
from driftwatch.model import Snapshot, utcnow
from driftwatch.report.html.history import render_history
from driftwatch.triage.ignore import Ignoring
from tests.diff.builders import SRT, baseline, make_snapshot
from tests.diff.test_launch import SGLANG, logs, processes
from tests.report.html.dom import Node, parse
from tests.seed import seed_log
from tests.report.html.hostile import ALERT, FILE, PACKAGE, hostile_history


def test_one_step_per_change_oldest_first_with_its_time() -> None:
    root = parse(render_history(hostile_history()))
    assert root.find("p", "headline").text == (
        "gpu01: 3 steps with changes across 4 snapshots, 2026-02-19 10:00:00 UTC → 2026-02-19 13:00:00 UTC"
    )
    steps = root.find("ol", "timeline").find_all("li", "step")
    assert [s.find("span", "when").text for s in steps] == [
        "2026-02-19 11:00:00 UTC", "2026-02-19 12:00:00 UTC", "2026-02-19 13:00:00 UTC",
    ]
    assert steps[0].find("span", "since").text == "(since 2026-02-19 10:00:00 UTC)"
    # Each step's dot has the colour of its most severe change.
    assert [s.attrs["class"] for s in steps] == ["step tone-high", "step tone-high", "step tone-critical"]
    # Ranked as diff ranks them: sgl-kernel (high), the file (medium), the new packages (low).
    items = [r.find("td", "item").text for r in steps[1].find_all("tr", "change")]
    assert items[:2] == ["sgl-kernel", FILE] and set(items[2:]) == {PACKAGE, ALERT}
    assert [g.find("h3").text for g in steps[1].find_all("section", "group")] == ["HIGH (1)", "MEDIUM (1)", "LOW (2)"]


def history_with_a_touched_file_and_a_damaged_snapshot(show_all: bool) -> str:
    facts = baseline()
    states = [make_snapshot(minutes=0, **copy.deepcopy(facts)), None]  # None: a file the store could not read
    facts["files"]["files"][f"{SRT}/server_args.py"]["mtime"] = 1772028120.0  # touched, content identical
    facts["gpu"]["driver_version"] = "610.1"
    states.append(make_snapshot(minutes=60, **facts))
    history = walk_history(states, HistoryQuery("gpu01", DiffOptions(), Ignoring([], {}, utcnow())))
    return render_history(history, show_all=show_all)


def test_context_is_folded_unless_all_and_damaged_files_are_counted() -> None:
    root = parse(history_with_a_touched_file_and_a_damaged_snapshot(show_all=False))
    step = root.find("li", "step")
    assert [g.find("h3").text for g in step.find_all("section", "group")] == ["CRITICAL (1)"]
    assert step.find("p", "note-line").text == "1 context finding that changes nothing (--all shows them)"
    assert "1 unreadable snapshot between, skipped" in step.find("span", "since").text
    assert [p.text for p in root.find_all("p", "sub")] == ["1 unreadable snapshot file skipped"]
    shown = parse(history_with_a_touched_file_and_a_damaged_snapshot(show_all=True)).find("li", "step")
    assert [g.find("h3").text for g in shown.find_all("section", "group")] == [
        "CRITICAL (1)", "CONTEXT: changes nothing that runs (1)",
    ]


def test_a_history_without_changes_says_so() -> None:
    states = [make_snapshot(minutes=0), make_snapshot(minutes=60)]
    history = walk_history(states, HistoryQuery("gpu01", DiffOptions(), Ignoring([], {}, utcnow())))
    root = parse(render_history(history))
    assert not root.find_all("ol", "timeline") and "No step with changes." in root.text


def test_a_recovery_marks_the_value_it_left_as_the_bad_one() -> None:
    """Good (auto-detected 0.88), then `--mem-fraction-static 0.55` fails, then the flag is removed."""
    def state(minutes: int, *flags: str, fails: bool) -> Snapshot:
        fraction = float(flags[-1]) if flags else 0.88
        return make_snapshot(minutes=minutes, processes=processes(*SGLANG, *flags), logs=logs(seed_log(fraction, fails=fails)))

    history = walk_history([state(0, fails=False), state(60, "--mem-fraction-static", "0.55", fails=True),
                            state(120, fails=False)], HistoryQuery("gpu01", DiffOptions(), Ignoring([], {}, utcnow())))
    broke, fixed = parse(render_history(history)).find("ol", "timeline").find_all("li", "step")

    def marks(step: Node) -> tuple[set[str], set[str]]:
        [row] = [r for r in step.find_all("tr", "change") if r.find("td", "category").text == "launch-arg"]
        return row.find("td", "old").classes & {"worse", "better"}, row.find("td", "new").classes & {"worse", "better"}

    assert marks(broke) == ({"better"}, {"worse"})  # 0.55 broke it
    assert marks(fixed) == ({"worse"}, {"better"})  # and leaving 0.55 is the recovery, not a regression
