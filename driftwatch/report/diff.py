"""The diff report in three forms that say the same thing: terminal, Markdown, JSON."""

from __future__ import annotations

import re
from typing import Any

from rich.console import Console
from rich.text import Text

from driftwatch.diff import Change, Severity

from driftwatch.explain import DiffResult
from driftwatch.explain.symptoms import lead
from driftwatch.facts import fmt
from driftwatch.report.safe import clean
from driftwatch.when import shown

SEVERITY_STYLE = {
    Severity.critical: "bold white on red",
    Severity.high: "bold red",
    Severity.medium: "yellow",
    Severity.low: "cyan",
    Severity.info: "dim",
}


HEADLINE_MAX = 200  # characters: one sentence on a terminal's first line, in a chat alert, an HTML title


def headline(result: DiffResult, limit: int | None = None) -> str:
    """`7 changes; most likely cause: …` (one clause, the whole at most ``limit`` characters)
    or `no drift` (with what is not drift counted)."""
    summary = result.summary
    if not result.drift:
        asides = []
        accepted, context = len(result.with_status("accepted")), len(result.context_changes)
        if accepted:
            asides.append(f"{accepted} accepted")
        if context:
            asides.append("1 context finding that changes nothing" if context == 1 else f"{context} context findings that change nothing")
        text = "no drift" + (f" ({'; '.join(asides)})" if asides else "")
        if result.problems:  # never an exit code without its reason in the text
            first = result.problems[0]
            more = f" (and {len(result.problems) - 1} more)" if len(result.problems) > 1 else ""
            text += f", but a new known-bad state{more}: "
            text += short_cause(first.why, (limit or HEADLINE_MAX) - len(text))
        return text
    noun = "change" if summary["total"] == 1 else "changes"
    room = limit or HEADLINE_MAX
    symptom, top = lead(result.drift_changes)
    if symptom is not None:  # what broke first, then why
        tail = f" ({summary['total']} {noun})"
        # Its own clause; one that is too long keeps both ends (an error's specific part,
        # the symbol or the library, is at its end). The cause gets the larger share.
        said = fmt.ends(first_clause(symptom.headline or symptom.explanation), room * 2 // 5)
        why = "; most likely cause: " if top is not None else "; no recorded change explains it"
        left = room - len(said) - len(why) - len(tail)
        return said + why + (clause(top, left) if top is not None else "") + tail
    head = f"{summary['total']} {noun}; most likely cause: "
    return head + (clause(top, room - len(head)) if top is not None else "")


def clause(change: Change, room: int = HEADLINE_MAX) -> str:
    """A change as a headline says it, within ``room``: the first clause of its own short form
    or of its explanation, and why an accepted change counts again (never an alert without
    its reason: ``changed again since accepted``, ``acceptance expired …``)."""
    text = first_clause(change.headline or change.explanation)
    if not change.lapsed:
        return cut(text, room)
    lapsed = change.lapsed.split(" (", 1)[0]
    return cut(text, room - len(lapsed) - 3) + " — " + lapsed


def first_clause(text: str) -> str:
    """Up to the first sentence's end or the first "—" aside."""
    return re.split(r" — |\. (?=[A-Z(])", text, maxsplit=1)[0].rstrip(" .;")


def short_cause(text: str, room: int) -> str:
    """A change's explanation as one clause for a headline: up to its first sentence or its
    first "—" aside (the known-bad state, the KV arithmetic: the report's detail has them),
    cut at a word within ``room`` characters."""
    return cut(first_clause(text), room)


def cut(text: str, room: int) -> str:
    """``text`` within ``room`` characters, cut at a word."""
    if len(text) <= room:
        return text
    return text[: room - 1].rsplit(" ", 1)[0].rstrip(" ,;:") + "…"


def note(change: Change) -> str:
    """What a report adds after a change's explanation: why it is accepted or ignored, or
    why an accepted or ignored change counts again."""
    waiver = change.waiver
    if change.lapsed:
        return change.lapsed
    if waiver is None:
        return ""
    until = f", until {shown(waiver.until)}" if waiver.until else ""
    if waiver.kind == "accepted":
        at = f" {shown(waiver.at)}" if waiver.at else ""
        return f"accepted by {waiver.by}{at}: {waiver.reason}{until}"
    return f"ignored by {waiver.rule}: {waiver.reason}{until}"


def with_note(change: Change) -> str:
    extra = note(change)
    return f"{change.explanation} — {extra}" if extra else change.explanation


def ignored_line(changes: list[Change], shown_already: bool) -> str | None:
    return ignored_summary([f"{c.category} {c.shown_item}" for c in changes if c.status == "ignored"], shown_already)


def ignored_summary(names: list[str], shown_already: bool) -> str | None:
    """``3 ignored: gpu-process (process list), env NCCL_DEBUG, … (--all shows them)``:
    what the config's ignore rules hid is counted, never silently dropped."""
    if not names:
        return None
    listed = ", ".join(names[:4]) + (", …" if len(names) > 4 else "")
    return f"{len(names)} ignored: {listed}" + ("" if shown_already else " (--all shows them)")


def sides(result: DiffResult) -> str:
    old, new = result.summary["old"], result.summary["new"]
    return f"{_side(old)} → {_side(new)}"


def _side(side: dict[str, Any]) -> str:
    labels = f" [{', '.join(side['labels'])}]" if side.get("labels") else ""
    return f"{side['host']} {side['taken_at'][:19].replace('T', ' ')}{labels}"


SYMPTOMS_TITLE = "OBSERVED: what broke (the causes follow, most likely first)"
CONTEXT_TITLE = "CONTEXT: changes nothing that runs"
ACCEPTED_TITLE = "ACCEPTED: known, not drift"
IGNORED_TITLE = "IGNORED by the config"
_LATER = (("accepted", ACCEPTED_TITLE, "green"), ("context", CONTEXT_TITLE, "dim"), ("ignored", IGNORED_TITLE, "dim"))


def groups(
    changes: list[Change], *, show_ignored: bool = False, show_context: bool = True
) -> list[tuple[str, str, list[Change]]]:
    """(title, style, changes): drift by severity, most severe first, then the accepted,
    the context (unless folded), and (when asked) the ignored."""
    by_severity: dict[Severity, list[Change]] = {}
    for change in changes:
        if change.drift and not change.symptom:
            by_severity.setdefault(change.severity, []).append(change)
    symptoms = [change for change in changes if change.drift and change.symptom]
    found = [(SYMPTOMS_TITLE, "bold magenta", symptoms)] if symptoms else []
    found += [
        (severity.value.upper(), SEVERITY_STYLE[severity], members)
        for severity, members in sorted(by_severity.items(), key=lambda item: -item[0].rank)
    ]
    for status, title, style in _LATER:
        members = [change for change in changes if change.status == status]
        shown_here = show_ignored if status == "ignored" else show_context if status == "context" else True
        if members and shown_here:
            found.append((title, style, members))
    return found


def print_changes(
    console: Console, changes: list[Change], *, show_ignored: bool, show_context: bool = True, indent: str = ""
) -> None:
    for title, style, members in groups(changes, show_ignored=show_ignored, show_context=show_context):
        console.print()
        console.print(Text(f"{indent} {title} ({len(members)}) ", style=style))
        for change in members:
            line = Text(indent + "  ")
            line.append(f"{change.category:<11} ", style="bold")
            line.append(clean(change.explanation))
            extra = note(change)
            if extra:
                line.append(" — ")
                line.append(clean(extra), style="bold yellow" if change.lapsed else "italic")
            console.print(line)
    folded = [] if show_context else [folded_context(changes)]
    for summary in filter(None, [*folded, ignored_line(changes, show_ignored)]):
        console.print()
        console.print(Text(indent + clean(summary), style="dim"))


def folded_context(changes: list[Change]) -> str | None:
    """``2 context findings that change nothing (--all shows them)``, or None."""
    count = sum(c.status == "context" for c in changes)
    if not count:
        return None
    noun = "1 context finding that changes" if count == 1 else f"{count} context findings that change"
    return f"{noun} nothing (--all shows them)"


def print_terminal(console: Console, result: DiffResult, *, show_ignored: bool = False) -> None:
    console.print(Text(clean(headline(result)), style="bold"))
    console.print(Text(clean(sides(result)), style="dim"))
    print_changes(console, result.changes, show_ignored=show_ignored)


def markdown_rows(changes: list[Change], *, show_ignored: bool, show_context: bool = True) -> list[str]:
    """One table, read as the terminal report is: what broke first (its severity cell says
    ``observed``), then the causes, most likely first, then what is not drift."""
    observed = [change for change in changes if change.drift and change.symptom]
    rows = []
    for change in [*observed, *(change for change in changes if change not in observed)]:
        if change.status == "ignored" and not show_ignored or change.status == "context" and not show_context:
            continue
        severity = change.severity.value if change.drift else change.status
        if change in observed:
            severity += " (observed)"
        rows.append(f"| {severity} | {change.category} | {md_cell(change.shown_item)} | {md_cell(with_note(change))} |")
    if not rows:
        return []
    return ["", "| severity | category | item | change |", "|---|---|---|---|", *rows]


def render_markdown(result: DiffResult, *, show_ignored: bool = False) -> str:
    lines = [f"**driftwatch:** {md_text(headline(result))}", "", f"_{md_text(sides(result))}_"]
    lines += markdown_rows(result.changes, show_ignored=show_ignored)
    ignored = ignored_line(result.changes, show_ignored)
    if ignored:
        lines += ["", f"_{md_text(ignored)}_"]
    return "\n".join(lines) + "\n"


# What Markdown (CommonMark with GitHub's tables and strikethrough) could read as syntax in
# inline text, and only that: code spans, emphasis, links, HTML, entities. Intraword
# underscores (pip_check, NCCL_P2P_DISABLE), parentheses, "#" and "+" mid-line, and a
# backslash before a letter are plain text there, so they stay as they are.
_MD_ALWAYS = re.compile(
    r"[`*\[\]<]"  # code spans, emphasis, links, HTML and autolinks
    r"|\\(?=[!-/:-@\[-`{-~]|$)"  # a backslash that would escape what follows (or our closing mark)
    r"|(?<![^\W_])_|_(?![^\W_])"  # an underscore beside no letter or digit: it could open or close emphasis
    r"|(?<=\S)~"  # a tilde that could close a strikethrough (one after a space cannot)
    r"|&(?=#?[A-Za-z0-9]+;)"  # an entity: "&lt;" stays those four characters
    r"|^[#>+=-]"  # block syntax, where the text starts a line
)
_MD_LIST = re.compile(r"^(\d+)([.)])(?=\s|$)")  # "1. " or "1) " starting a line is a list item


def md_text(text: object) -> str:
    """Host text printed literally in Markdown: no links, HTML, code or emphasis from a host,
    and no backslash where Markdown would read the character as text anyway."""
    escaped = _MD_ALWAYS.sub(lambda found: "\\" + found.group(), clean(text))
    return _MD_LIST.sub(r"\1\\\2", escaped)


def md_cell(text: object) -> str:
    """``md_text`` for a table cell, where ``|`` ends the cell."""
    return md_text(text).replace("|", "\\|").replace("\n", " ")
