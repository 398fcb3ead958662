"""`driftwatch history HOST`: every change between consecutive stored snapshots, oldest first."""

from __future__ import annotations

from collections.abc import Iterator

from driftwatch.commands.common import emit, html_path, ignoring, load, store_warnings, warn_unused_rules, write_html
from driftwatch.commands.diff import output_format
from driftwatch.config import host_watch
from driftwatch.diff import DiffOptions
from driftwatch.errors import UserError
from driftwatch.history import History, HistoryQuery, walk_history
from driftwatch.model import Snapshot, utcnow
from driftwatch.report.history import print_terminal, render_markdown
from driftwatch.store import Location, SnapshotStore
from driftwatch.triage.apply import RuleUse
from driftwatch.when import parse_when

EXIT_OK = 0


def run_history(
    host: str, *, pattern: str | None, since: str | None, json_out: bool, markdown: bool, show_all: bool,
    config_path: str | None, store_path: str | None, html: str | None = None,
) -> int:
    form = output_format(json_out, markdown)
    html_file = html_path(html)
    if pattern is not None and not pattern.strip():
        raise UserError("--item needs a word or a glob, e.g. --item nccl")
    since_at = parse_when(since, now=utcnow(), end_of_day=False, relative_sign=-1) if since else None
    config, store = load(config_path, store_path)
    if host in config.groups:
        raise UserError(f"{host!r} is a group: history follows one host (name one of {', '.join(config.groups[host])})")
    paths = store.paths(host)
    if not paths:
        known = ", ".join(store.hosts()) or "none"
        raise UserError(f"no snapshots of {host!r} in {store.root} (hosts with snapshots: {known})")
    options = DiffOptions(free_memory_threshold_mib=config.free_memory_threshold_mib, focus=list(host_watch(config, host).focus))
    # Named as `list` names it: `local` is this machine's stored name.
    query = HistoryQuery(store.name_of(host), options, ignoring(config), pattern=pattern, since=since_at)
    use = RuleUse()
    with store_warnings(store):  # each damaged file named once, on stderr
        history = walk_history(_one_at_a_time(store, paths), query, use)
    warn_unused_rules(config, use)
    write_html(html_file, lambda: _html_page(history, show_all))
    emit(
        form, history.to_json, lambda: render_markdown(history, show_all=show_all),
        lambda console: print_terminal(console, history, show_all=show_all),
    )
    return EXIT_OK


def _html_page(history: History, show_all: bool) -> str:
    from driftwatch.report.html.history import render_history  # jinja2: only for --html

    return render_history(history, show_all=show_all)


def _one_at_a_time(store: SnapshotStore, paths: list[Location]) -> Iterator[Snapshot | None]:
    """Each file read when the walk reaches it; None for one the store could not read."""
    for path in paths:
        stored = next(store.readable([path]), None)
        yield stored.snapshot if stored is not None else None
