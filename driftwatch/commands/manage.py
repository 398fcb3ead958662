"""`driftwatch label` and `driftwatch prune`: curate the store."""

from __future__ import annotations

from rich.text import Text

from driftwatch.commands.common import load, print_json, stdout_console, store_warnings
from driftwatch.errors import UserError
from driftwatch.report.safe import clean
from driftwatch.cron.retention import prune
from driftwatch.store import resolve_ref, validate_label


def run_label(ref: str, label: str, *, remove: bool, config_path: str | None, store_path: str | None) -> int:
    if not remove:  # a label from before the rules can still be removed
        validate_label(label)
    _, store = load(config_path, store_path)
    with store_warnings(store):
        found = resolve_ref(store, ref)
    labels = [x for x in found.snapshot.labels if x != label]
    if not remove:
        labels.append(label)
    elif label not in found.snapshot.labels:
        raise UserError(f"{found.path} has no label {label!r} (labels: {', '.join(found.snapshot.labels) or 'none'})")
    store.rewrite(found.path, found.snapshot.model_copy(update={"labels": labels}))
    verb = "removed from" if remove else "added to"
    stdout_console().print(Text(f"label {clean(label)} {verb} {found.path}"))
    return 0


def run_prune(
    hosts: list[str], *, keep: int | None, keep_days: float | None, json_out: bool,
    config_path: str | None, store_path: str | None,
) -> int:
    if keep is None and keep_days is None:
        raise UserError("say what to keep: --keep N (newest N per host) and/or --keep-days D")
    _, store = load(config_path, store_path)
    with store_warnings(store):  # each unreadable file is named on stderr
        pruned = {host: prune(store, host, keep=keep, keep_days=keep_days) for host in (hosts or store.hosts())}
    if json_out:
        print_json({host: [str(p) for p in result.removed] for host, result in pruned.items()})
    else:
        console = stdout_console()
        for host, result in pruned.items():
            line = f"{clean(host)}: removed {len(result.removed)} unlabelled snapshot(s)"
            if result.unreadable:
                line += f"; left {result.unreadable} unreadable file(s) alone"
            console.print(Text(line))
    return 0
