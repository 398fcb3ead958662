"""`driftwatch list` and `driftwatch show`."""

from __future__ import annotations

from pathlib import Path

from driftwatch.commands.common import load, print_json, stdout_console, store_origin, store_warnings, warn
from driftwatch.errors import UserError
from driftwatch.report.snapshots import print_list
from driftwatch.store import ListedSnapshot, resolve_ref


def run_list(host: str | None, *, json_out: bool, config_path: str | None, store_path: str | None) -> int:
    config, store = load(config_path, store_path)
    where = f"{store.root} ({store_origin(config, store_path)})"
    if isinstance(store.root, Path) and not store.root.exists():
        raise UserError(f"snapshot store {where} does not exist")
    with store_warnings(store):
        # One listing of the host's prefix, or of the whole store: never one per host.
        found = {store.name_of(host): store.paths(host)} if host else store.inventory()
        if host and not found[store.name_of(host)]:
            raise UserError(f"no snapshots of {host!r} in {where} (hosts: {', '.join(store.hosts()) or 'none'})")
    if not found:
        warn(f"snapshot store {where} has no snapshots")
    # Each file's head (its time and labels) and size, never the whole file: 20,000 of a
    # host are listed in seconds, in the memory of one row each.
    rows = [(name, store.listed(path)) for name, paths in found.items() for path in paths]
    if json_out:
        print_json([_list_entry(name, row) for name, row in rows])
    else:
        print_list(stdout_console(), rows)
    return 0


def _list_entry(host: str, row: ListedSnapshot) -> dict[str, object]:
    if row.error is not None:
        return {"host": host, "path": str(row.path), "error": row.error}
    return {
        "host": host,
        "path": str(row.path),
        "taken_at": row.taken_at.isoformat() if row.taken_at else None,
        "labels": row.labels,
        "bytes": row.size,
    }


def run_show(ref: str, *, json_out: bool, config_path: str | None, store_path: str | None) -> int:
    config, store = load(config_path, store_path)
    with store_warnings(store):
        found = resolve_ref(store, ref)
    if json_out:
        print_json(found.snapshot.model_dump(mode="json"))
    else:
        from driftwatch.report.show import print_show

        print_show(stdout_console(), found.snapshot, found.path, focus=list(config.watch.focus))
    return 0
