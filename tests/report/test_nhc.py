"""The health-check line: why the node fails, one bounded line that always starts the same."""

from __future__ import annotations

from driftwatch.diff import Change, Severity
from driftwatch.report.nhc import MAX_LINE, nhc_line


def test_a_passing_check_prints_nothing() -> None:
    assert nhc_line(None, []) is None


def test_the_first_cause_is_the_reason_with_the_rest_counted() -> None:
    assert nhc_line(None, ["sgl-kernel 0.3.16 → 0.3.17", "torch 2.8 → 2.9"]) == (
        "ERROR: driftwatch: sgl-kernel 0.3.16 → 0.3.17 (+1 more)"
    )


def test_an_accepted_change_that_counts_again_says_why() -> None:
    change = Change(
        "package", "sgl-kernel", "0.3.16", "0.3.17", Severity.high, "sgl-kernel 0.3.16 → 0.3.17",
        lapsed="acceptance expired 2026-03-01",
    )
    assert nhc_line(None, [change.cause]) == "ERROR: driftwatch: sgl-kernel 0.3.16 → 0.3.17 — acceptance expired 2026-03-01"


def test_an_error_is_the_reason_bounded_with_its_count_kept() -> None:
    line = nhc_line("no baseline\nCRITICAL forged " + "x" * 500, [])
    assert line is not None and len(line) == MAX_LINE and "\n" not in line
    assert line.startswith("ERROR: driftwatch: could not check: no baseline\\nCRITICAL forged xxx") and line.endswith("…")
    line = nhc_line(None, ["y" * 500] + ["z"] * 11)
    assert line is not None and len(line) == MAX_LINE and line.endswith("… (+11 more)")
