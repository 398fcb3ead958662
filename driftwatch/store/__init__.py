"""The snapshot store: a local folder or an object store, used the same way by every command.

    names.py      host folder names, snapshot file names and their order, labels
    backend.py    the seam: what a medium must do (folder or object store)
    local.py      a local folder (atomic temp file + hard link, file locks, old-layout upgrade)
    objects.py    an object store through fsspec (s3://, gs://, az://)
    snapshots.py  SnapshotStore: latest, labels, ~N, what was unreadable, over any backend
    refs.py       HOST@SELECTOR and file REFs
"""

from __future__ import annotations

from driftwatch.store.backend import Backend, Location
from driftwatch.store.local import LAYOUT_MARK, LocalBackend
from driftwatch.store.names import host_dir_name, host_from_dir_name, is_timestamp_prefix, validate_label
from driftwatch.store.refs import load_snapshot, parse_ref, resolve_ref
from driftwatch.store.snapshots import (
    LOCAL, ListedSnapshot, SnapshotStore, StoredSnapshot, is_url, open_backend, parse_snapshot,
)

__all__ = [
    "LAYOUT_MARK", "LOCAL", "Backend", "ListedSnapshot", "Location", "LocalBackend", "SnapshotStore", "StoredSnapshot",
    "host_dir_name", "host_from_dir_name", "is_timestamp_prefix", "is_url", "load_snapshot", "open_backend",
    "parse_ref", "parse_snapshot", "resolve_ref", "validate_label",
]
