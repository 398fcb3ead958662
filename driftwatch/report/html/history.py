"""A host's history as one HTML page: a timeline, oldest first, each step with when it was
seen, since when, and its changes ranked and grouped as ``diff`` groups them."""

from __future__ import annotations

from dataclasses import dataclass

from driftwatch.facts.fmt import plural
from driftwatch.history import History, Step
from driftwatch.report.diff import folded_context, ignored_line
from driftwatch.report.history import headline, quiet_line, step_since, step_when, visible_steps
from driftwatch.report.html.diff import Group, change_groups
from driftwatch.report.html.page import extra_sections, render

RESULT_KEYS = frozenset({"host", "item", "since", "first", "last", "steps", "summary"})


@dataclass(frozen=True)
class StepView:
    when: str
    since: str
    tone: str  # the most severe drift of the step; else the status of its first change
    groups: list[Group]
    notes: list[str]


def step_view(step: Step, show_all: bool) -> StepView:
    drift = step.drift
    tone = max(drift, key=lambda c: c.severity.rank).severity.value if drift else step.changes[0].status
    folded = None if show_all else folded_context(step.changes)
    return StepView(
        when=step_when(step), since=step_since(step), tone=tone,
        groups=change_groups(step.changes, show_ignored=show_all, show_context=show_all),
        notes=[line for line in (folded, ignored_line(step.changes, show_all)) if line],
    )


def render_history(history: History, *, show_all: bool = False) -> str:
    unreadable = (
        f"{plural(history.unreadable, 'unreadable snapshot file')} skipped"
        if history.unreadable else None
    )
    quiet = quiet_line(history, show_all)
    return render(
        "history.html.j2",
        title=f"driftwatch history: {history.host}",
        headline=headline(history),
        steps=[step_view(step, show_all) for step in visible_steps(history, show_all)],
        subs=[unreadable] if unreadable else [],
        notes=[quiet] if quiet else [],
        extras=extra_sections(history.to_json(), RESULT_KEYS),
    )
