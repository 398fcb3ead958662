"""Keep the store bounded: deduplicate unchanged cron snapshots, prune old ones.

Design: ``check`` stores every run's snapshot, then deletes the host's previous snapshot
when it is unlabelled and the diff between the two is empty (volatile readings aside).
An unchanged host therefore keeps one unlabelled snapshot — the newest — however often
cron runs, and every state the host was really in stays in the store. ``prune`` removes
old unlabelled snapshots by count or age; labelled snapshots are never deleted.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from driftwatch.diff import diff_snapshots
from driftwatch.errors import StoreError
from driftwatch.model import Snapshot, utcnow
from driftwatch.store import SnapshotStore, StoredSnapshot, load_snapshot


def save_deduplicated(store: SnapshotStore, snapshot: Snapshot, previous: StoredSnapshot | None) -> Path:
    path = store.save(snapshot)
    if previous is not None and previous.path != path and not previous.snapshot.labels:
        if not diff_snapshots(previous.snapshot, snapshot).changes:
            previous.path.unlink(missing_ok=True)
    return path


def prune(store: SnapshotStore, host: str, *, keep: int | None, keep_days: float | None) -> list[Path]:
    """Delete unlabelled snapshots beyond the newest ``keep`` or older than ``keep_days``.

    The newest snapshot is always kept; unreadable files are left alone (they are reported
    by `list`, and deleting what we cannot read is not ours to decide).
    """
    paths = store.paths(host)
    cutoff = utcnow() - timedelta(days=keep_days) if keep_days is not None else None
    removed: list[Path] = []
    for position, path in enumerate(reversed(paths)):
        if position == 0:
            continue
        try:
            snap = load_snapshot(path)
        except StoreError:
            continue
        if snap.labels:
            continue
        too_many = keep is not None and position >= keep
        too_old = cutoff is not None and snap.taken_at < cutoff
        if too_many or too_old:
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed
