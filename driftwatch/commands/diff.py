"""`driftwatch diff OLD NEW`: explain what changed between two snapshots."""

from __future__ import annotations

from rich.text import Text

from driftwatch.commands.common import emit, load, stderr_console, store_warnings
from driftwatch.diff import DiffOptions, DiffResult, diff_snapshots
from driftwatch.errors import UserError
from driftwatch.report.diff import print_terminal, render_markdown
from driftwatch.report.safe import clean
from driftwatch.store import resolve_ref

EXIT_OK, EXIT_DRIFT = 0, 2


def output_format(json_out: bool, markdown: bool) -> str:
    if json_out and markdown:
        raise UserError("--json and --markdown are exclusive: pick one")
    return "json" if json_out else "markdown" if markdown else "terminal"


def print_report(result: DiffResult, form: str) -> None:
    if result.summary.get("different_hosts"):
        old, new = result.summary["old"], result.summary["new"]
        clone = (
            " (one machine id under two hostnames: a cloned image? GPUs are matched by position)"
            if result.summary.get("cloned_image") else ""
        )
        stderr_console().print(
            Text(
                f"warning: comparing two different hosts ({clean(old['hostname'] or old['host'])} and "
                f"{clean(new['hostname'] or new['host'])}): identity facts differ by nature{clone}",
                style="yellow",
            )
        )
    emit(form, result.to_json, lambda: render_markdown(result), lambda console: print_terminal(console, result))


def run_diff(
    old_ref: str, new_ref: str, *, json_out: bool, markdown: bool, include_volatile: bool,
    config_path: str | None, store_path: str | None,
) -> int:
    form = output_format(json_out, markdown)
    config, store = load(config_path, store_path)
    with store_warnings(store):
        old, new = resolve_ref(store, old_ref), resolve_ref(store, new_ref)
    options = DiffOptions(
        include_volatile=include_volatile,
        free_memory_threshold_mib=config.free_memory_threshold_mib,
        focus=list(config.watch.focus),
    )
    result = diff_snapshots(old.snapshot, new.snapshot, options=options)
    print_report(result, form)
    return EXIT_DRIFT if result.drift else EXIT_OK
