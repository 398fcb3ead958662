"""`driftwatch diff OLD NEW`: explain what changed between two snapshots."""

from __future__ import annotations

import os
import re
from pathlib import Path

from driftwatch.commands.common import (
    emit, html_path, ignoring, load, store_warnings, warn, warn_unused_rules, write_html,
)
from driftwatch.diff import DiffOptions
from driftwatch.explain import DiffResult, diff_snapshots
from driftwatch.facts.read import ok_facts
from driftwatch.model import Snapshot
from driftwatch.errors import UserError
from driftwatch.report.diff import print_terminal, render_markdown
from driftwatch.store import is_timestamp_prefix, parse_ref, resolve_ref
from driftwatch.triage.apply import RuleUse, triage
from driftwatch.triage.book import read_book

EXIT_OK, EXIT_DRIFT = 0, 2


def output_format(json_out: bool, markdown: bool) -> str:
    if json_out and markdown:
        raise UserError("--json and --markdown are exclusive: pick one")
    return "json" if json_out else "markdown" if markdown else "terminal"


def print_report(result: DiffResult, form: str, *, show_ignored: bool = False) -> None:
    if result.summary.get("different_hosts"):
        old, new = result.summary["old"], result.summary["new"]
        clone = (
            " (one machine id under two hostnames: a cloned image? GPUs are matched by position)"
            if result.summary.get("cloned_image") else ""
        )
        warn(f"comparing two different hosts ({old['hostname'] or old['host']} and "
             f"{new['hostname'] or new['host']}): identity facts differ by nature{clone}")
    emit(
        form, result.to_json, lambda: render_markdown(result, show_ignored=show_ignored),
        lambda console: print_terminal(console, result, show_ignored=show_ignored),
    )


def html_page(result: DiffResult, *, show_ignored: bool, old: Snapshot | None = None, new: Snapshot | None = None) -> str:
    from driftwatch.report.html.diff import render_diff  # jinja2: only for --html
    from driftwatch.report.perf import charts

    both = [ok_facts(s, "perf") for s in (old, new) if s is not None]
    drawn = charts(*both) if len(both) == 2 and all(both) else []
    return render_diff(result, show_ignored=show_ignored, charts=drawn)


def run_diff(
    old_ref: str, new_ref: str, *, json_out: bool, markdown: bool, include_volatile: bool,
    config_path: str | None, store_path: str | None, html: str | None = None,
) -> int:
    form = output_format(json_out, markdown)
    html_file = html_path(html)
    config, store = load(config_path, store_path)
    with store_warnings(store):
        old, new = resolve_ref(store, old_ref), resolve_ref(store, new_ref)
    options = DiffOptions(
        include_volatile=include_volatile,
        free_memory_threshold_mib=config.free_memory_threshold_mib,
        focus=list(config.watch.focus),
        version_rules=tuple(config.rules),
    )
    result = diff_snapshots(old.snapshot, new.snapshot, options=options)
    host, label = new.snapshot.host.name, baseline_label(old_ref)
    acceptances = []
    if label is not None:  # OLD is HOST@LABEL: NEW's host's acceptances against that baseline apply
        book = read_book(store, host)
        for problem in book.problems:
            warn(problem)
        acceptances = book.for_baseline(label, new.snapshot.taken_at)  # as they stood then
    use = RuleUse()
    result = triage(result, host=host, ignoring=ignoring(config), acceptances=acceptances, use=use)
    warn_unused_rules(config, use)
    write_html(html_file, lambda: html_page(result, show_ignored=include_volatile, old=old.snapshot, new=new.snapshot))
    print_report(result, form, show_ignored=include_volatile)
    # A new known-bad state no one decided on fails like drift, as it does in check.
    return EXIT_DRIFT if result.drift or result.problems else EXIT_OK


def baseline_label(ref: str) -> str | None:
    """The label when ``ref`` is ``HOST@LABEL`` (not a file, latest, ~N or a timestamp)."""
    if ref.endswith(".json") or os.sep in ref and Path(ref).exists():
        return None
    _, selector = parse_ref(ref)
    if selector == "latest" or re.fullmatch(r"~\d+", selector) or is_timestamp_prefix(selector):
        return None
    return selector
