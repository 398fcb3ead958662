"""Snapshots a user named lately: retention keeps them.

A user who runs ``diff gpu01@2026-12-01T10 gpu01@latest`` expects to run it again after
the next cron ``check``; ``check`` deletes the previous snapshot when nothing changed, and
``prune`` deletes old unlabelled ones. Each ``HOST@<time>`` or ``HOST@~N`` reference a
command resolves to an unlabelled snapshot is noted in ``<store>/<host folder>/.named.json`` (file name → when), and both keep a snapshot
named within ``KEEP_NAMED``. Noting is best effort: a store the user may only read
(another user's, a read-only bucket) is still read, and nothing is said.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta

from driftwatch.errors import StoreError
from driftwatch.model import utcnow
from driftwatch.store.backend import Location
from driftwatch.store.names import file_name
from driftwatch.store.snapshots import SnapshotStore

STATE_NAME = ".named.json"
KEEP_NAMED = timedelta(days=1)
MAX_ENTRIES = 64  # the newest this many names are kept: the file stays small


def named_times(store: SnapshotStore, host: str) -> dict[str, datetime]:
    """File name → when a command last named it; {} when there is no readable record."""
    raw = store.read_state(host, STATE_NAME)
    try:
        data = json.loads(raw) if raw else {}
        return {str(k): datetime.fromisoformat(v) for k, v in data.items()} if isinstance(data, dict) else {}
    except (ValueError, TypeError):
        return {}  # damaged: nothing is kept for it, and the next note rewrites it


def note_named(store: SnapshotStore, host: str, location: Location) -> None:
    """Record that a user named ``location`` now; never fails the command."""
    try:
        times = named_times(store, host)
        times[file_name(location)] = utcnow()
        newest = sorted(times.items(), key=lambda item: item[1], reverse=True)[:MAX_ENTRIES]
        store.write_state(host, STATE_NAME, json.dumps({k: v.isoformat() for k, v in newest}).encode())
    except (StoreError, OSError):
        pass


def recently_named(store: SnapshotStore, host: str, now: datetime | None = None) -> set[str]:
    """File names named within ``KEEP_NAMED`` of ``now``."""
    cutoff = (now or utcnow()) - KEEP_NAMED
    return {name for name, when in named_times(store, host).items() if when >= cutoff}


def is_kept(names: set[str], location: Location) -> bool:
    return file_name(location) in names
