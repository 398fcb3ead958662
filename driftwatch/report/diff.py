"""The diff report in three forms that say the same thing: terminal, Markdown, JSON."""

from __future__ import annotations

import re
from typing import Any

from rich.console import Console
from rich.text import Text

from driftwatch.diff import Change, DiffResult, Severity
from driftwatch.report.safe import clean

SEVERITY_STYLE = {
    Severity.critical: "bold white on red",
    Severity.high: "bold red",
    Severity.medium: "yellow",
    Severity.low: "cyan",
    Severity.info: "dim",
}


def headline(result: DiffResult) -> str:
    """`7 changes; most likely cause: …` or `no drift` (with the context findings counted)."""
    summary = result.summary
    context = len(result.context_changes)
    aside = ""
    if context:
        aside = " (1 context finding that changes nothing)" if context == 1 else f" ({context} context findings that change nothing)"
    if not result.drift:
        return "no drift" + aside
    noun = "change" if summary["total"] == 1 else "changes"
    return f"{summary['total']} {noun}; most likely cause: {summary['most_likely_cause']}"


def sides(result: DiffResult) -> str:
    old, new = result.summary["old"], result.summary["new"]
    return f"{_side(old)} → {_side(new)}"


def _side(side: dict[str, Any]) -> str:
    labels = f" [{', '.join(side['labels'])}]" if side.get("labels") else ""
    return f"{side['host']} {side['taken_at'][:19].replace('T', ' ')}{labels}"


CONTEXT_TITLE = "CONTEXT: changes nothing that runs"


def groups(changes: list[Change]) -> list[tuple[str, str, list[Change]]]:
    """(title, style, changes): drift by severity, most severe first, then the context."""
    by_severity: dict[Severity, list[Change]] = {}
    for change in changes:
        if change.drift:
            by_severity.setdefault(change.severity, []).append(change)
    found = [
        (severity.value.upper(), SEVERITY_STYLE[severity], members)
        for severity, members in sorted(by_severity.items(), key=lambda item: -item[0].rank)
    ]
    context = [change for change in changes if change.context]
    return found + ([(CONTEXT_TITLE, "dim", context)] if context else [])


def print_terminal(console: Console, result: DiffResult) -> None:
    console.print(Text(clean(headline(result)), style="bold"))
    console.print(Text(clean(sides(result)), style="dim"))
    for title, style, changes in groups(result.changes):
        console.print()
        console.print(Text(f" {title} ({len(changes)}) ", style=style))
        for change in changes:
            line = Text("  ")
            line.append(f"{change.category:<11} ", style="bold")
            line.append(clean(change.explanation))
            console.print(line)


def render_markdown(result: DiffResult) -> str:
    lines = [f"**driftwatch:** {md_text(headline(result))}", "", f"_{md_text(sides(result))}_"]
    if result.changes:
        lines += ["", "| severity | category | item | change |", "|---|---|---|---|"]
        for change in result.changes:
            severity = change.severity.value if change.drift else "context"
            lines.append(
                f"| {severity} | {change.category} | {md_cell(change.shown_item)} | {md_cell(change.explanation)} |"
            )
    return "\n".join(lines) + "\n"


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]<>()#+!|~])")


def md_text(text: object) -> str:
    """Host text printed literally in Markdown: no links, HTML or emphasis from a host."""
    return _MD_SPECIAL.sub(r"\\\1", clean(text))


def md_cell(text: object) -> str:
    return md_text(text).replace("\n", " ")
