"""`driftwatch fleet [TARGET...]`: compare hosts that should be alike, name the odd ones out."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from rich.console import Console
from rich.text import Text

from driftwatch import interrupt
from driftwatch.commands.common import (
    emit, host_message, html_path, ignoring, load, stderr_console, store_warnings, warn_unused_rules, write_html,
)
from driftwatch.commands.diff import output_format
from driftwatch.config import Config, Target, resolve_targets
from driftwatch.diff import DiffOptions, Severity
from driftwatch.errors import UserError
from driftwatch.fleet import FleetResult, compare_fleet
from driftwatch.fleet.compare import compare_gathered
from driftwatch.fleet.headline import headline_facts
from driftwatch.model import Snapshot, utcnow
from driftwatch.report.diff import IGNORED_TITLE, SEVERITY_STYLE, ignored_summary, md_cell, md_text
from driftwatch.report.fleet import shared_states
from driftwatch.report.safe import clean
from driftwatch.store import SnapshotStore
from driftwatch.triage.apply import RuleUse
from driftwatch.triage.fleet import ignore_findings

EXIT_OK, EXIT_ERROR, EXIT_OUTLIERS = 0, 1, 2
HOSTS_NAMED = 8  # a longer host list is counted, not spelled out
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_NEVER_STALE_S = 1000 * 366 * 86400


def parse_age(text: str) -> timedelta | None:
    """``30m``, ``2h``, ``1d``, ``90s`` or plain seconds; a one-line UserError otherwise.
    None for an age no snapshot can have (over 1,000 years): nothing is stale."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", text.lower())
    if match is None or float(match.group(1)) <= 0:
        raise UserError(f"--max-age {text!r}: expected a duration such as 30m, 2h or 1d")
    seconds = float(match.group(1)) * _UNITS[match.group(2) or "s"]
    return None if seconds > _NEVER_STALE_S else timedelta(seconds=seconds)


@dataclass
class FleetRequest:
    fresh: bool = False  # --snapshot: collect now (and store) instead of the latest stored
    json_out: bool = False
    markdown: bool = False
    parallel: int = 32
    timeout: float | None = None
    show_ignored: bool = False  # --all: list the findings [[ignore]] rules hide
    html: str | None = None  # --html FILE
    max_age: timedelta | None = timedelta(hours=1)  # stored snapshots older than this are stale
    unreachable: list[tuple[str, str]] = field(default_factory=list)
    stale: list[tuple[str, datetime]] = field(default_factory=list)  # host, when its latest snapshot was taken


def run_fleet(words: list[str], request: FleetRequest, *, config_path: str | None, store_path: str | None) -> int:
    """No TARGET: every host in the store (push mode: each node stores its own snapshots)."""
    form = output_format(request.json_out, request.markdown)
    html_file = html_path(request.html)
    if request.fresh and not words:
        raise UserError("--snapshot connects to the hosts it is given: name them (or a group)")
    config, store = load(config_path, store_path)
    options = DiffOptions(
        free_memory_threshold_mib=config.free_memory_threshold_mib, focus=list(config.watch.focus),
        version_rules=tuple(config.rules),
    )
    with store_warnings(store):  # unreadable snapshot files skipped are named, each once
        if request.fresh:
            snapshots = _fresh(_targets(config, words), config, store, request)
            compared = compare_fleet(snapshots, options)
            # The matrix needs a dozen short facts per host, never the snapshots themselves.
            headlines = {host: headline_facts(snapshot) for host, snapshot in snapshots.items()}
        else:
            compared, headlines = _stored(words, config, store, request, options)
    use = RuleUse()
    result = ignore_findings(compared, ignoring(config), use)
    warn_unused_rules(config, use)
    result.summary["unreachable"] = [{"host": h, "error": e} for h, e in request.unreachable]
    result.summary["stale"] = [{"host": h, "taken_at": t.isoformat()} for h, t in request.stale]
    write_html(html_file, lambda: _html_page(result, headlines, request.show_ignored))
    emit(
        form, result.to_json, lambda: render_markdown(result, request.show_ignored),
        lambda console: print_terminal(console, result, request.show_ignored),
    )
    if request.unreachable or request.stale:
        return EXIT_ERROR  # each host's outcome is data; the exit code is the worst one
    return EXIT_OK if result.agree else EXIT_OUTLIERS


def _html_page(result: FleetResult, headlines: dict[str, dict[str, str]], show_ignored: bool) -> str:
    from driftwatch.report.html.fleet import render_fleet  # jinja2: only for --html

    return render_fleet(result, headlines, show_ignored=show_ignored)


def _targets(config: Config, words: list[str]) -> list[Target]:
    targets = resolve_targets(config, words)
    if len(targets) < 2:
        names = ", ".join(clean(t.name) for t in targets)
        raise UserError(f"fleet compares two or more hosts; got {len(targets)} ({names}): name more hosts or a group")
    return targets


def _stored(
    words: list[str], config: Config, store: SnapshotStore, request: FleetRequest, options: DiffOptions
) -> tuple[FleetResult, dict[str, dict[str, str]]]:
    """Each host's newest readable snapshot, extracted as it is read (unreadable files are skipped
    and recorded); the comparison, and each host's headline facts."""
    from driftwatch.commands.fleet_stored import gather_stored

    if not words:
        files = store.inventory()  # every host in the store, from one listing of it
        if len(files) < 2:
            raise UserError(f"fleet compares two or more hosts; {store.root} has snapshots of {len(files)}")
    else:
        names = [t.name for t in _targets(config, words)]
        files = dict(zip(names, interrupt.run_all(store.paths, names, workers=16, name="list"), strict=True))
        for name, paths in files.items():
            if not paths:
                raise UserError(
                    f"{clean(name)}: no snapshot in {store.root}; take one "
                    f"(driftwatch snapshot {clean(name)}) or run fleet with --snapshot"
                )
    now = utcnow()
    found = gather_stored(store, files, options, max_age=request.max_age, now=now)
    request.unreachable += found.left_out
    request.stale += found.stale
    _report_left_out(request, now)
    if len(found.gathered.hosts) < 2:
        raise UserError(
            f"only {len(found.gathered.hosts)} of {len(files)} hosts have a readable snapshot"
            f"{_within(request.max_age)}: nothing to compare"
        )
    return compare_gathered(found.gathered, options), {h.name: h.headline for h in found.gathered.hosts}


def _within(max_age: timedelta | None) -> str:
    return f" newer than --max-age {_age(max_age)}" if max_age is not None else ""


def _age(age: timedelta) -> str:
    seconds = int(age.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.3g}{unit}"
    return f"{seconds}s"


def _report_left_out(request: FleetRequest, now: datetime | None = None) -> None:
    err = stderr_console()
    for host, error in request.unreachable:
        err.print(Text(f"driftwatch: {clean(host)}: {clean(error)} (left out of the comparison)", style="red"))
    for host, taken in request.stale:
        err.print(Text(
            f"driftwatch: {clean(host)}: stale: its latest snapshot is {_age((now or utcnow()) - taken)} old, "
            f"over --max-age {_age(request.max_age or timedelta())} (not compared; is its timer running?)", style="red",
        ))


def _fresh(targets: list[Target], config: Config, store: SnapshotStore, request: FleetRequest) -> dict[str, Snapshot]:
    # Imported here: only --snapshot needs SSH, and paramiko costs a quarter second.
    from driftwatch.commands.snapshot import collect_many

    store.ensure_writable()  # before connecting: --snapshot stores what it collects
    outcomes = collect_many(
        targets, config, store, timeout=request.timeout or config.timeout, labels=[], parallel=request.parallel
    )
    snapshots: dict[str, Snapshot] = {}
    for outcome in outcomes:
        if outcome.snapshot is None:
            request.unreachable.append((outcome.target.name, outcome.error or "no snapshot"))
            continue
        snapshots[outcome.target.name] = outcome.snapshot
        if outcome.error:  # collected but not stored (store full...): still compared
            stderr_console().print(Text(clean(host_message(outcome.target.name, outcome.error)), style="red"))
    _report_left_out(request)
    if len(snapshots) < 2:
        raise UserError(f"only {len(snapshots)} of {len(targets)} hosts could be snapshotted: nothing to compare")
    return snapshots


def _hosts_line(result: FleetResult) -> str:
    line = f"compared: {_names(result.summary['hosts'])}"
    missing = [u["host"] for u in result.summary.get("unreachable", [])]
    stale = [s["host"] for s in result.summary.get("stale", [])]
    return line + (f"; left out: {_names(missing)}" if missing else "") + (f"; stale: {_names(stale)}" if stale else "")


def _names(hosts: list[str]) -> str:
    if len(hosts) <= HOSTS_NAMED:
        return ", ".join(hosts)
    return f"{', '.join(hosts[:HOSTS_NAMED])} and {len(hosts) - HOSTS_NAMED} more ({len(hosts)} hosts)"


def _ignored_line(result: FleetResult, shown_already: bool) -> str | None:
    return ignored_summary([f"{f.category} {f.item}" for f, _ in result.ignored], shown_already)


def print_terminal(console: Console, result: FleetResult, show_ignored: bool = False) -> None:
    console.print(Text(clean(result.summary["headline"]), style="bold"))
    console.print(Text(clean(_hosts_line(result)), style="dim"))
    groups: dict[Severity, list[str]] = {}
    for finding in result.findings:
        groups.setdefault(finding.severity, []).append(f"{finding.category:<11} {finding.explanation}")
    for severity in sorted(groups, key=lambda s: -s.rank):
        console.print()
        console.print(Text(f" {severity.value.upper()} ({len(groups[severity])}) ", style=SEVERITY_STYLE[severity]))
        for line in groups[severity]:
            console.print(Text("  " + clean(line)))
    states = shared_states(result)
    if states:
        console.print()
        console.print(Text(f" KNOWN-BAD ({len(states)}) ", style="bold red"))
    for shared in states:  # each state once, with where it holds: "every host (12)"
        k = shared.state
        console.print(Text(clean(f"  {k.severity.value:<8} {k.rule} on {shared.where}: {k.why} [{k.evidence}]. Fix: {k.fix}")))
    if show_ignored and result.ignored:
        console.print()
        console.print(Text(f" {IGNORED_TITLE} ({len(result.ignored)}) ", style="dim"))
        for finding, waiver in result.ignored:
            line = f"{finding.category:<11} {finding.explanation} — ignored by {waiver.rule}: {waiver.reason}"
            console.print(Text("  " + clean(line)))
    ignored = _ignored_line(result, show_ignored)
    if ignored:
        console.print()
        console.print(Text(clean(ignored), style="dim"))


def render_markdown(result: FleetResult, show_ignored: bool = False) -> str:
    lines = [f"**driftwatch fleet:** {md_text(result.summary['headline'])}", "", f"_{md_text(_hosts_line(result))}_"]
    rows = [(f, f.severity.value, f.explanation) for f in result.findings]
    if show_ignored:
        rows += [(f, "ignored", f"{f.explanation} — ignored by {w.rule}: {w.reason}") for f, w in result.ignored]
    if rows:
        lines += ["", "| severity | category | item | hosts | finding |", "|---|---|---|---|---|"]
        for f, severity, text in rows:
            named = ", ".join(h for h, _ in f.outliers) or ", ".join(h for _, hs in f.values for h in hs)
            lines.append(f"| {severity} | {f.category} | {md_cell(f.item)} | {md_cell(named)} | {md_cell(text)} |")
    ignored = _ignored_line(result, show_ignored)
    if ignored:
        lines += ["", f"_{md_text(ignored)}_"]
    states = shared_states(result)
    if states:
        lines += ["", "| hosts | severity | known-bad state | fix | reference |", "|---|---|---|---|---|"]
        lines += [f"| {md_cell(shared.where)} | {shared.state.severity.value} | {md_cell(shared.state.why)} | "
                  f"{md_cell(shared.state.fix)} | {md_cell(shared.state.reference)} |" for shared in states]
    return "\n".join(lines) + "\n"
