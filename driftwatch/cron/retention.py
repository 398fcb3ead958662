"""Keep the store bounded: deduplicate unchanged cron snapshots, prune old ones.

Design: ``check`` stores every run's snapshot, then deletes the host's previous snapshot
when it is unlabelled and the diff between the two is empty (volatile readings aside).
An unchanged host therefore keeps one unlabelled snapshot — the newest — however often
cron runs, and every state the host was really in stays in the store. ``prune`` removes
old unlabelled snapshots by count or age; labelled snapshots are never deleted, nor is a
snapshot a user named (``diff HOST@<time> …``) within the last day (store/named.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from driftwatch.explain import diff_snapshots
from driftwatch.model import Snapshot, utcnow
from driftwatch.store import Location, SnapshotStore, StoredSnapshot
from driftwatch.store.named import is_kept, recently_named


def save_deduplicated(store: SnapshotStore, snapshot: Snapshot, previous: StoredSnapshot | None) -> Location:
    path = store.save(snapshot)
    if previous is not None and previous.path != path and not previous.snapshot.labels:
        named = recently_named(store, snapshot.host.name)
        if not is_kept(named, previous.path) and not diff_snapshots(previous.snapshot, snapshot).changes:
            store.delete(previous.path)
    return path


@dataclass
class Pruned:
    removed: list[Location]
    unreadable: int  # files that could not be read: never kept, never deleted, only counted


def prune(store: SnapshotStore, host: str, *, keep: int | None, keep_days: float | None) -> Pruned:
    """Delete unlabelled snapshots beyond the newest ``keep`` or older than ``keep_days``.

    Only readable snapshots count: the newest readable one, labelled ones and those a
    user named within the last day are always kept, and unreadable files neither take a "keep" place nor get deleted (deleting what
    we cannot read is not ours to decide; the command reports them). Temp files left by
    killed writers are cleaned on the way.
    """
    store.clean_temps(host)
    cutoff = utcnow() - timedelta(days=keep_days) if keep_days is not None else None
    removed: list[Location] = []
    named = recently_named(store, host)
    for position, stored in enumerate(store.newest_first(host)):
        snap = stored.snapshot
        if position == 0 or snap.labels or is_kept(named, stored.path):
            continue
        too_many = keep is not None and position >= keep
        too_old = cutoff is not None and snap.taken_at < cutoff
        if too_many or too_old:
            store.delete(stored.path)
            removed.append(stored.path)
    return Pruned(removed, len(store.unreadable(host)))
