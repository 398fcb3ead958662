"""The doctor report in three forms that say the same thing: terminal, Markdown, JSON.

One report per host: its known-bad states, most severe first, each with why, whether it is
observed or predicted, the fix and the public reference; notes (info) after them; the rules
that could not run are counted here and listed with their reasons by ``--json``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.text import Text

from driftwatch.model import ProbeRecord, ProbeStatus
from driftwatch.report.diff import SEVERITY_STYLE, md_cell, md_text
from driftwatch.report.safe import clean
from driftwatch.rules.finding import Diagnosis, Finding
from driftwatch.severity import Severity


@dataclass
class HostReport:
    host: str
    source: str  # "snapshot taken now, stored as …" or the stored snapshot's path
    diagnosis: Diagnosis | None = None
    error: str | None = None  # unreachable, unreadable, or taken but not stored
    # Probes of the snapshot that failed or timed out, with why: what the rules could not see.
    unread: dict[str, str] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        """2 for a known-bad state; 1 for an error, or for "none" said of a host that was
        not wholly read (a failed or timed-out probe hides what its rules would have found)."""
        if self.error is not None:
            return 1
        if self.diagnosis is not None and self.diagnosis.problems:
            return 2
        return 1 if self.unread else 0

    def to_json(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"host": self.host, "source": self.source, "exit_code": self.exit_code}
        if self.error is not None:
            entry["error"] = self.error
        if self.diagnosis is not None:
            entry.update(self.diagnosis.to_json())
        entry["unread"] = dict(self.unread)
        return entry


def headline(report: HostReport) -> str:
    if report.diagnosis is None:
        return f"{report.host}: {report.error}"
    d = report.diagnosis
    problems, notes = len(d.problems), len(d.findings) - len(d.problems)
    found = f"{problems} known-bad state{'s' if problems != 1 else ''}" if problems else "no known-bad state"
    if report.unread:
        found += " in what could be read"
    counts = ", ".join(f"{d.counts()[s.value]} {s.value}" for s in Severity if s is not Severity.info and d.counts()[s.value])
    note = f"; {notes} note{'s' if notes != 1 else ''}" if notes else ""
    unread = f"; {len(report.unread)} probe{'s' if len(report.unread) != 1 else ''} not read" if report.unread else ""
    return f"{report.host}: {found}" + (f" ({counts})" if counts else "") + note + unread


def unread_probes(probes: dict[str, ProbeRecord]) -> dict[str, str]:
    """``{probe: "timeout: why"}`` for every probe of a snapshot that failed or timed out."""
    return {name: f"{record.status.value}: {record.error or 'no reason recorded'}"
            for name, record in probes.items() if record.status in (ProbeStatus.error, ProbeStatus.timeout)}


def _not_run(d: Diagnosis) -> str:
    if not d.not_run:
        return f"all {len(d.ran)} rules ran"
    return f"{len(d.ran)} rules ran; {len(d.not_run)} lacked their facts (--json lists why)"


def print_terminal(console: Console, reports: list[HostReport]) -> None:
    for i, report in enumerate(reports):
        if i:
            console.print()
        console.print(Text(clean(headline(report)), style="bold" if report.error is None else "bold red"))
        console.print(Text(clean(report.source), style="dim"))
        for name, why in report.unread.items():
            console.print(Text(clean(f"  not read: {name} probe ({why}); its rules could not run"), style="yellow"))
        if report.diagnosis is None:
            continue
        for title, style, findings in _groups(report.diagnosis):
            console.print()
            console.print(Text(f" {title} ({len(findings)}) ", style=style))
            for finding in findings:
                _print_finding(console, finding)
        console.print(Text(clean(_not_run(report.diagnosis)), style="dim"))


def _print_finding(console: Console, finding: Finding) -> None:
    line = Text("  ")
    line.append(f"{finding.rule} ", style="bold")
    line.append(f"[{finding.evidence}] ", style="italic")
    line.append(clean(finding.why))
    console.print(line)
    console.print(Text("      fix: " + clean(finding.fix)))
    console.print(Text("      see: " + clean(finding.reference), style="dim"))


def _groups(d: Diagnosis) -> list[tuple[str, str, list[Finding]]]:
    by: dict[Severity, list[Finding]] = {}
    for finding in d.findings:
        by.setdefault(finding.severity, []).append(finding)
    return [
        ("NOTES" if s is Severity.info else s.value.upper(), SEVERITY_STYLE[s], by[s])
        for s in sorted(by, key=lambda s: -s.rank)
    ]


def render_markdown(reports: list[HostReport]) -> str:
    lines: list[str] = []
    for report in reports:
        lines += [f"**driftwatch doctor:** {md_text(headline(report))}", "", f"_{md_text(report.source)}_"]
        if report.unread:
            lines += [""] + [f"- not read: {md_text(name)} probe ({md_text(why)}); its rules could not run"
                             for name, why in report.unread.items()]
        if report.diagnosis is not None and report.diagnosis.findings:
            lines += ["", "| severity | rule | evidence | finding | fix | reference |", "|---|---|---|---|---|---|"]
            for f in report.diagnosis.findings:
                lines.append(
                    f"| {f.severity.value} | {f.rule} | {f.evidence} | {md_cell(f.why)} | {md_cell(f.fix)} | "
                    f"{md_cell(f.reference)} |"
                )
        if report.diagnosis is not None:
            lines += ["", f"_{md_text(_not_run(report.diagnosis))}_"]
        lines.append("")
    return "\n".join(lines)
