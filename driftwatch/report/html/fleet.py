"""The fleet as one HTML page: a matrix of hosts × facts with every outlier cell marked and
its majority value on hover, then the findings as the terminal report lists them, then
the known-bad states, each once with the hosts that hold it.

Columns: the headline facts (``fleet/headline.py``) that any host has, then one per fact
with a finding that no headline column stands for, in the findings' rank order. Cells of
a headline column show each host's headline value; cells of a finding's column show the
value the comparison saw. The matrix reads only the ``FleetResult`` and a small dict of
headline facts per host, never the snapshots.

The page never scrolls sideways (a 1400-pixel screen, an email client): the headline
facts are one table, the other facts that differ follow in tables of at most
``MATRIX_COLUMNS`` columns, each with the host column again, and long values wrap.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass

from driftwatch.diff import Severity
from driftwatch.fleet import FleetResult
from driftwatch.fleet.compare import Finding
from driftwatch.fleet.explain import show
from driftwatch.fleet.headline import COLUMNS, column_of
from driftwatch.report.diff import IGNORED_TITLE, ignored_summary
from driftwatch.report.fleet import shared_states
from driftwatch.report.html.page import StateRow, extra_fields, extra_sections, render, state_row

# Finding.to_json's keys this page lays out; others are listed with the finding.
FINDING_KEYS = frozenset({
    "category", "item", "fact", "severity", "explanation", "compared", "majority", "outliers", "values",
})
RESULT_KEYS = frozenset({"findings", "ignored", "summary", "known_bad"})
HEADLINE_KEYS = frozenset(c.key for c in COLUMNS)
# A finding with how each host stands in it: host → ("outlier" | "agrees" | "split", value).
Placed = tuple[Finding, dict[str, tuple[str, Hashable]]]
UNCOMPARED = "not compared: its probe failed, or it is compared only with hosts that share what this depends on"
# Fact columns per matrix table: beside the host column, each keeps ~100 px at 1400 px.
MATRIX_COLUMNS = 11


@dataclass(frozen=True)
class Cell:
    text: str
    kind: str  # "" (agrees or no finding), "outlier", "split" (no majority), "uncompared"
    title: str


@dataclass(frozen=True)
class Column:
    key: str  # a headline column's key or a fact path: the cells' data-fact
    title: str
    tone: str  # the severity of its most severe finding; "" when none
    hint: str


@dataclass(frozen=True)
class Row:
    host: str
    odd: bool
    cells: list[Cell]


@dataclass(frozen=True)
class Part:
    """One table of the matrix: some of its columns, every host's row."""

    title: str
    columns: list[Column]
    rows: list[Row]


@dataclass(frozen=True)
class FindingRow:
    tone: str
    category: str
    item: str
    hosts: str
    explanation: str
    extra: list[tuple[str, str]]


def matrix(result: FleetResult, headlines: Mapping[str, Mapping[str, str]]) -> tuple[list[Column], list[Row]]:
    hosts: list[str] = list(result.summary["hosts"])
    found: dict[str, list[Placed]] = {}  # column key → its findings, in rank order
    titles = {c.key: c.title for c in COLUMNS}
    for finding in result.findings:
        column = column_of(finding.fact)
        key = column.key if column else finding.fact
        found.setdefault(key, []).append((finding, _roles(finding)))
        titles.setdefault(key, finding.label or finding.item)
    shown = [c.key for c in COLUMNS if c.key in found or any(headlines.get(h, {}).get(c.key) for h in hosts)]
    keys = shown + [key for key in found if key not in HEADLINE_KEYS]

    def headline(host: str, key: str) -> str:
        return headlines.get(host, {}).get(key, "") if key in HEADLINE_KEYS else ""

    odd = set(result.summary.get("outlier_hosts", []))
    rows = [
        Row(host, host in odd, [_cell(host, found.get(key, []), headline(host, key)) for key in keys]) for host in hosts
    ]
    return _columns(keys, titles, found), rows


def parts(columns: list[Column], rows: list[Row]) -> list[Part]:
    """The matrix as tables that fit the page: the headline facts, then the other facts
    that differ, ``MATRIX_COLUMNS`` at a time."""
    headline = sum(column.key in HEADLINE_KEYS for column in columns)  # they come first
    spans = [(0, headline)] if headline else []
    spans += [(start, min(start + MATRIX_COLUMNS, len(columns))) for start in range(headline, len(columns), MATRIX_COLUMNS)]
    found = []
    for number, (start, end) in enumerate(spans):
        title = "Headline facts" if start < headline else "Other facts that differ"
        if start >= headline and len(spans) - bool(headline) > 1:
            title += f" ({number + 1 - bool(headline)} of {len(spans) - bool(headline)})"
        found.append(Part(title, columns[start:end], [Row(r.host, r.odd, r.cells[start:end]) for r in rows]))
    return found


def _columns(keys: list[str], titles: dict[str, str], found: dict[str, list[Placed]]) -> list[Column]:
    columns = []
    for key in keys:
        findings = [finding for finding, _ in found.get(key, [])]
        worst = max((f.severity for f in findings), key=lambda s: s.rank, default=None)
        labels = ", ".join(dict.fromkeys(f.label or f.item for f in findings))
        columns.append(Column(key, titles[key], worst.value if worst else "", f"{worst.value}: {labels}" if worst else ""))
    return columns


def _roles(finding: Finding) -> dict[str, tuple[str, Hashable]]:
    """How each host stands in ``finding``: ("outlier" | "agrees" | "split", its value).
    Built once per finding: a thousand hosts' cells then look their host up."""
    roles: dict[str, tuple[str, Hashable]] = {}
    if finding.majority is not None:
        roles.update((host, ("agrees", finding.majority[0])) for host in finding.majority_hosts)
    roles.update((host, ("outlier", value)) for host, value in finding.outliers)
    roles.update((host, ("split", value)) for value, hosts in finding.values for host in hosts)
    return roles


def _why(finding: Finding, role: str, value: Hashable) -> str:
    label = finding.label or finding.item
    if role == "split":
        spread = "; ".join(f"{show(v)} on {', '.join(names)}" for v, names in finding.values)
        return f"{label}: no majority ({spread})"
    assert finding.majority is not None
    majority, count = finding.majority
    return f"{label}: {show(value)} here, majority {show(majority)} ({count} of {finding.hosts} hosts)"


def _cell(host: str, findings: list[Placed], headline: str) -> Cell:
    """``findings``: the column's, each with its ``_roles``; ``headline``: the host's
    headline value for a headline column ("" for others)."""
    roles = [(f, *by_host[host]) for f, by_host in findings if host in by_host]
    marked = [(f, role, value) for f, role, value in roles if role != "agrees"]
    kind = "outlier" if any(role == "outlier" for _, role, _ in marked) else "split" if marked else ""
    title = " · ".join(_why(*entry) for entry in marked)
    if headline:
        return Cell(headline, kind, title)
    if roles:  # the value the comparison saw
        return Cell(show((marked or roles)[0][2]), kind, title)
    if findings:  # its probe failed, or it differs on what this fact is compared within
        return Cell("—", "uncompared", UNCOMPARED)
    return Cell("—", "", "")  # nothing recorded (no server running: no memory fraction)


def _named(finding: Finding) -> str:
    return ", ".join(h for h, _ in finding.outliers) or ", ".join(h for _, hs in finding.values for h in hs)


def finding_row(finding: Finding, tone: str | None = None, explanation: str | None = None) -> FindingRow:
    return FindingRow(
        tone=tone or finding.severity.value, category=finding.category, item=finding.label or finding.item,
        hosts=_named(finding), explanation=explanation or finding.explanation,
        extra=extra_fields(finding.to_json(), FINDING_KEYS),
    )


def finding_groups(result: FleetResult, show_ignored: bool) -> list[tuple[str, str, list[FindingRow]]]:
    """(title, tone, rows): by severity, most severe first, then (with --all) the ignored."""
    by_severity: dict[Severity, list[FindingRow]] = {}
    for finding in result.findings:
        by_severity.setdefault(finding.severity, []).append(finding_row(finding))
    found = [(s.value.upper(), s.value, rows) for s, rows in sorted(by_severity.items(), key=lambda i: -i[0].rank)]
    if show_ignored and result.ignored:
        rows = [finding_row(f, "ignored", f"{f.explanation} — ignored by {w.rule}: {w.reason}") for f, w in result.ignored]
        found.append((IGNORED_TITLE, "ignored", rows))
    return found


def state_rows(result: FleetResult) -> list[StateRow]:
    """Each known-bad state once, with where it holds: "every host (12)" for a fleet-wide one."""
    return [state_row(shared.state, shared.where) for shared in shared_states(result)]


def render_fleet(
    result: FleetResult, headlines: Mapping[str, Mapping[str, str]] | None = None, *, show_ignored: bool = False
) -> str:
    """``headlines``: each host's ``headline_facts`` (hosts without one show only findings' values)."""
    columns, rows = matrix(result, headlines or {})
    summary = result.summary
    ignored = ignored_summary([f"{f.category} {f.item}" for f, _ in result.ignored], show_ignored)
    return render(
        "fleet.html.j2",
        title=f"driftwatch fleet: {summary['headline']}",
        headline=summary["headline"],
        hosts=list(summary["hosts"]),
        left_out=[(u["host"], u["error"]) for u in summary.get("unreachable", [])],
        parts=parts(columns, rows),
        groups=finding_groups(result, show_ignored),
        states=state_rows(result),
        notes=[ignored] if ignored else [],
        extras=extra_sections(result.to_json(), RESULT_KEYS),
    )
