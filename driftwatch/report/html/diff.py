"""The diff as one HTML page, grouped as the terminal report is: drift by severity, then
the accepted, the context and (with --all) the ignored; each change with its old and
new value, its explanation and why it is accepted or ignored."""

from __future__ import annotations

from dataclasses import dataclass

from driftwatch.diff import Change

from driftwatch.explain import DiffResult
from driftwatch.report.diff import groups, headline, ignored_line, note, sides
from driftwatch.report.perf import Chart
from driftwatch.report.html.page import extra_fields, extra_sections, render, value_text

# Change.to_json's keys this page lays out; any other (a field a later feature adds) is
# listed under the change's explanation rather than dropped.
CHANGE_KEYS = frozenset({
    "category", "item", "old", "new", "severity", "explanation", "drift", "status", "waiver", "lapsed", "role",
})
RESULT_KEYS = frozenset({"changes", "summary"})


@dataclass(frozen=True)
class ChangeRow:
    tone: str  # CSS class: the severity of drift, else accepted, context or ignored
    badge: str
    category: str
    item: str
    old: str
    new: str
    explanation: str
    note: str  # why accepted or ignored, or why it counts again
    lapsed: bool
    extra: list[tuple[str, str]]


@dataclass(frozen=True)
class Group:
    title: str
    tone: str
    rows: list[ChangeRow]


def change_row(change: Change) -> ChangeRow:
    tone = change.severity.value if change.drift else change.status
    return ChangeRow(
        tone=tone, badge=tone, category=change.category, item=change.shown_item,
        old=value_text(change.old), new=value_text(change.new), explanation=change.explanation,
        note=note(change), lapsed=bool(change.lapsed), extra=extra_fields(change.to_json(), CHANGE_KEYS),
    )


def change_groups(changes: list[Change], *, show_ignored: bool, show_context: bool = True) -> list[Group]:
    found = groups(changes, show_ignored=show_ignored, show_context=show_context)
    # A group's changes share their severity (drift) or their status: the first one's tone is the group's.
    return [Group(title, rows[0].tone, rows) for title, rows in ((t, [change_row(c) for c in m]) for t, _, m in found)]


def render_diff(result: DiffResult, *, show_ignored: bool = False, charts: list[Chart] | None = None) -> str:
    """``charts``: the perf probe's figures of both sides, GPU by GPU (``report.perf.charts``)."""
    return render(
        "diff.html.j2",
        title=f"driftwatch diff: {sides(result)}",
        headline=headline(result),
        sides=sides(result),
        groups=change_groups(result.changes, show_ignored=show_ignored),
        notes=[line for line in [ignored_line(result.changes, show_ignored)] if line],
        extras=extra_sections(result.to_json(), RESULT_KEYS),
        charts=charts or [],
    )
