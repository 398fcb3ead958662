"""The history report, terminal and Markdown (JSON is ``History.to_json``): one block per
step, oldest first, headed by when it happened; context findings folded into a count."""

from __future__ import annotations

from datetime import datetime

from rich.console import Console
from rich.text import Text

from driftwatch.facts.fmt import plural
from driftwatch.history import History, Moment, Step
from driftwatch.report.diff import folded_context, ignored_line, markdown_rows, md_text, print_changes
from driftwatch.report.safe import clean


def _time(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def _labels(moment: Moment) -> str:
    return f" [{', '.join(moment.labels)}]" if moment.labels else ""


def step_title(step: Step) -> str:
    """``2026-03-02 04:10:11 UTC [good] (since 2026-03-01 10:00:00 UTC)``: the change
    happened between the two snapshots; the first time is when it was seen."""
    return f"{step_when(step)} ({step_since(step)})"


def step_when(step: Step) -> str:
    """When the step was first seen: the later snapshot's time and labels."""
    return f"{_time(step.after.taken_at)}{_labels(step.after)}"


def step_since(step: Step) -> str:
    skipped = f"; {plural(step.unreadable_between, 'unreadable snapshot')} between, skipped" if step.unreadable_between else ""
    return f"since {_time(step.before.taken_at)}{_labels(step.before)}{skipped}"


def headline(history: History) -> str:
    about = f" mentioning {history.pattern!r}" if history.pattern else ""
    since = f" since {_time(history.since)}" if history.since else ""
    span = ""
    if history.first and history.last:
        span = f", {_time(history.first.taken_at)} → {_time(history.last.taken_at)}"
    shown = len(history.steps) - history.quiet_steps
    return (
        f"{history.host}: {plural(shown, 'step')} with changes{about}{since} "
        f"across {plural(history.snapshots, 'snapshot')}{span}"
    )


def visible_steps(history: History, show_all: bool) -> list[Step]:
    """Steps whose only changes were ignored are counted, not shown, unless --all."""
    return [s for s in history.steps if show_all or any(c.status != "ignored" for c in s.changes)]


def quiet_line(history: History, show_all: bool) -> str | None:
    if show_all or not history.quiet_steps:
        return None
    return f"{plural(history.quiet_steps, 'step')} with only ignored changes not shown (--all shows them)"


def print_terminal(console: Console, history: History, *, show_all: bool = False) -> None:
    console.print(Text(clean(headline(history)), style="bold"))
    if history.unreadable:
        console.print(Text(f"{plural(history.unreadable, 'unreadable snapshot file')} skipped (named on stderr)", style="yellow"))
    for step in visible_steps(history, show_all):
        console.print()
        console.print(Text(clean(step_title(step)), style="bold cyan"))
        print_changes(console, step.changes, show_ignored=show_all, show_context=show_all, indent="  ")
    quiet = quiet_line(history, show_all)
    if quiet:
        console.print()
        console.print(Text(quiet, style="dim"))


def render_markdown(history: History, *, show_all: bool = False) -> str:
    lines = [f"**driftwatch history:** {md_text(headline(history))}"]
    for step in visible_steps(history, show_all):
        lines += ["", f"### {md_text(step_title(step))}"]
        lines += markdown_rows(step.changes, show_ignored=show_all, show_context=show_all)
        for folded in filter(None, [None if show_all else folded_context(step.changes), ignored_line(step.changes, show_all)]):
            lines += ["", f"_{md_text(folded)}_"]
    quiet = quiet_line(history, show_all)
    if quiet:
        lines += ["", f"_{md_text(quiet)}_"]
    return "\n".join(lines) + "\n"
