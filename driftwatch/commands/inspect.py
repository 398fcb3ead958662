"""`driftwatch list` and `driftwatch show`."""

from __future__ import annotations

from driftwatch.commands.common import load, print_json, stdout_console, store_warnings
from driftwatch.errors import StoreError, UserError
from driftwatch.model import Snapshot
from driftwatch.report.snapshots import print_list
from driftwatch.store import Location, resolve_ref


def run_list(host: str | None, *, json_out: bool, config_path: str | None, store_path: str | None) -> int:
    _, store = load(config_path, store_path)
    with store_warnings(store):
        # One listing of the host's prefix, or of the whole store: never one per host.
        found = {store.name_of(host): store.paths(host)} if host else store.inventory()
        if host and not found[store.name_of(host)]:
            raise UserError(f"no snapshots of {host!r} in {store.root} (hosts: {', '.join(store.hosts()) or 'none'})")
    rows: list[tuple[str, Location, Snapshot | None, str | None]] = []
    for name, paths in found.items():
        for path in paths:
            try:
                rows.append((name, path, store.load(path), None))
            except StoreError as exc:  # one bad file must not hide the others
                rows.append((name, path, None, str(exc)))
    if json_out:
        print_json([_list_entry(*row) for row in rows])
    else:
        print_list(stdout_console(), rows)
    return 0


def _list_entry(host: str, path: Location, snapshot: Snapshot | None, error: str | None) -> dict[str, object]:
    if snapshot is None:
        return {"host": host, "path": str(path), "error": error}
    return {
        "host": host,
        "path": str(path),
        "taken_at": snapshot.taken_at.isoformat(),
        "labels": snapshot.labels,
        "probes": {name: record.status.value for name, record in snapshot.probes.items()},
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
