"""The diff as one HTML page, grouped as the terminal report is: what broke first, then
drift by severity, the accepted, the context and (with --all) the ignored; each change
with its old and new value (the one that is the regression marked), its explanation and
why it is accepted or ignored; then the known-bad states, each once."""

from __future__ import annotations

from dataclasses import dataclass

from driftwatch.diff import Change, Severity
from driftwatch.explain import DiffResult
from driftwatch.explain.known_bad import GONE
from driftwatch.history import RECOVERY
from driftwatch.report.diff import groups, headline, ignored_line, note, sides
from driftwatch.report.perf import Chart
from driftwatch.report.html.page import StateRow, extra_fields, extra_sections, render, state_row, value_text
from driftwatch.rules.finding import NOTE, Finding

# Change.to_json's keys this page lays out; any other (a field a later feature adds) is
# listed under the change's explanation rather than dropped.
CHANGE_KEYS = frozenset({
    "category", "item", "old", "new", "severity", "explanation", "drift", "status", "waiver", "lapsed", "role",
})
RESULT_KEYS = frozenset({"changes", "summary", "known_bad", "known_bad_settled"})
# Drift at least this severe is a regression on its own: its new value is the bad one.
REGRESSION = Severity.medium


@dataclass(frozen=True)
class ChangeRow:
    tone: str  # CSS class: the severity of drift, else accepted, context or ignored
    badge: str
    category: str
    item: str
    old: str
    new: str
    worse: str  # "old" or "new": the value that is the regression; "" when neither is
    explanation: str
    note: str  # why accepted or ignored, or why it counts again
    lapsed: bool
    extra: list[tuple[str, str]]


@dataclass(frozen=True)
class Group:
    title: str
    tone: str
    rows: list[ChangeRow]


Key = tuple[str, str]


def worse_side(change: Change, healed: frozenset[Key] = frozenset()) -> str:
    """Which of a change's values is the regression, from what the diff concluded, never
    from which one is newer: the old one when the change is a recovery (a known-bad state
    of the old snapshot names it, ``healed``, and it made none); the new one when it is
    observed to break something (a symptom), produced a known-bad state, or is severe on
    its own (a lower power limit, a smaller /dev/shm, another driver); neither for a small
    step, a context finding or a decision."""
    if not change.drift:
        return ""
    recovered = (change.category, str(change.item)) in healed and not change.evidence
    if recovered or change.explanation.startswith((RECOVERY, GONE)):
        return "old"
    if change.symptom or change.evidence or change.severity.rank >= REGRESSION.rank:
        return "new"
    return ""


def healed(result: DiffResult) -> frozenset[Key]:
    """The changes' keys that known-bad states of the old snapshot, gone in the new, name."""
    return frozenset(subject for state in result.gone if state.severity is not NOTE for subject in state.subjects)


def change_row(change: Change, healed: frozenset[Key] = frozenset()) -> ChangeRow:
    tone = change.severity.value if change.drift else change.status
    return ChangeRow(
        tone=tone, badge=tone, category=change.category, item=change.shown_item,
        old=value_text(change.old), new=value_text(change.new), worse=worse_side(change, healed),
        explanation=change.explanation, note=note(change), lapsed=bool(change.lapsed),
        extra=extra_fields(change.to_json(), CHANGE_KEYS),
    )


def change_groups(
    changes: list[Change], *, show_ignored: bool, show_context: bool = True, healed: frozenset[Key] = frozenset()
) -> list[Group]:
    found = groups(changes, show_ignored=show_ignored, show_context=show_context)
    # A group's changes share their severity (drift) or their status: the first one's tone
    # is the group's; the symptoms that head the report have a tone of their own.
    return [
        Group(title, "symptom" if members[0].symptom and members[0].drift else rows[0].tone, rows)
        for title, members, rows in ((t, m, [change_row(c, healed) for c in m]) for t, _, m in found)
    ]


def state_groups(result: DiffResult) -> list[tuple[str, str, list[StateRow]]]:
    """(title, tone, rows): the known-bad states new in NEW, then those decided with their changes."""
    def rows(states: list[Finding], tone: str | None = None) -> list[StateRow]:
        return [state_row(state, _made_by(state, result.changes), tone) for state in states]

    found = [(STATES_TITLE, max(result.findings, key=lambda s: s.severity.rank).severity.value, rows(result.findings))
             ] if result.findings else []
    if result.settled:
        found.append((SETTLED_TITLE, "accepted", rows(result.settled, "accepted")))
    return found


STATES_TITLE = "KNOWN-BAD: new since the old snapshot"
SETTLED_TITLE = "KNOWN-BAD, decided with the changes that made it"


def _made_by(state: Finding, changes: list[Change]) -> str:
    """The changes of this diff among the state's subjects, as the report names them."""
    subjects = set(state.subjects)
    made = dict.fromkeys(f"{c.category} {c.shown_item}" for c in changes if (c.category, str(c.item)) in subjects)
    return ", ".join(made) or "—"


def render_diff(result: DiffResult, *, show_ignored: bool = False, charts: list[Chart] | None = None) -> str:
    """``charts``: the perf probe's figures of both sides, GPU by GPU (``report.perf.charts``)."""
    return render(
        "diff.html.j2",
        title=f"driftwatch diff: {sides(result)}",
        headline=headline(result),
        sides=sides(result),
        groups=change_groups(result.changes, show_ignored=show_ignored, healed=healed(result)),
        states=state_groups(result),
        notes=[line for line in [ignored_line(result.changes, show_ignored)] if line],
        extras=extra_sections(result.to_json(), RESULT_KEYS),
        charts=charts or [],
    )
