"""REFs: ``HOST@latest``, ``HOST@~N``, ``HOST@LABEL``, ``HOST@<timestamp prefix>`` or a file."""

from __future__ import annotations

import os
import re
from itertools import islice
from pathlib import Path

from driftwatch.errors import UserError
from driftwatch.model import Snapshot
from driftwatch.store.backend import DEFAULT_MAX_FILE_BYTES
from driftwatch.store.local import read_file
from driftwatch.store.named import note_named
from driftwatch.store.names import file_name, is_timestamp_prefix, order_key
from driftwatch.store.snapshots import SnapshotStore, StoredSnapshot, parse_snapshot


def load_snapshot(path: str | Path, max_bytes: int = DEFAULT_MAX_FILE_BYTES) -> Snapshot:
    """Read and validate one local snapshot file (a regular file, at most ``max_bytes``);
    every failure names the file."""
    path = Path(path)
    return parse_snapshot(read_file(path, max_bytes), path)


def parse_ref(ref: str) -> tuple[str, str]:
    """Split ``HOST@SELECTOR``; a bare host means its latest snapshot."""
    host, sep, selector = ref.rpartition("@")
    if not sep:
        return ref, "latest"
    if not host or not selector:
        raise UserError(f"bad snapshot reference {ref!r}: expected HOST@LABEL, HOST@latest, HOST@~N or a file")
    return host, selector


def _is_file_ref(ref: str) -> bool:
    return ref.endswith(".json") or os.sep in ref and Path(ref).exists()


def resolve_ref(store: SnapshotStore, ref: str) -> StoredSnapshot:
    """A snapshot file (a path, or a URL inside an object store), or HOST@latest / HOST@~N /
    HOST@LABEL / HOST@<timestamp prefix>; ``local`` means this machine (``store.local_name``).

    Unreadable files are skipped (and recorded, see ``take_warnings``) except a file named
    explicitly, which is an error naming it.
    """
    if "://" in ref and ref.endswith(".json"):
        if store.backend.folder_of(ref) is None:
            raise UserError(f"{ref}: not a file of the snapshot store {store.root}")
        return StoredSnapshot(ref, store.load(ref))
    if _is_file_ref(ref):
        return StoredSnapshot(Path(ref), load_snapshot(ref, store.backend.max_bytes))
    if "@" not in ref:
        raise UserError(_bare_host(store, ref))
    host, selector = parse_ref(ref)
    stored = _resolve_in_store(store, ref, host, selector)
    if selector not in ("latest", "~0") and not stored.snapshot.labels:
        # HOST@<time> or HOST@~N names one snapshot that retention might delete next: it keeps
        # what a user named lately (store/named.py). @latest and labels need no keeping.
        note_named(store, host, stored.path)
    return stored


def _resolve_in_store(store: SnapshotStore, ref: str, host: str, selector: str) -> StoredSnapshot:
    paths = store.paths(host)
    name = _shown_host(store, host)
    if not paths:
        known = ", ".join(store.hosts()) or "none"
        raise UserError(f"no snapshots of {name} in {store.root} (hosts with snapshots: {known})")
    if selector == "latest" or re.fullmatch(r"~\d+", selector):
        back = 0 if selector == "latest" else min(int(selector[1:]), len(paths))  # ~99999999999999999999
        found = list(islice(store.newest_first(host), back + 1))
        if len(found) <= back:
            raise UserError(f"{ref}: only {len(found)} readable snapshot(s) of {name}{_skipped(store, host)}")
        return found[back]
    # Labels cannot look like timestamps (validate_label), so a timestamp is never shadowed.
    if is_timestamp_prefix(selector):
        prefix = re.sub(r"[-:]", "", selector)
        matching = [p for p in paths if order_key(file_name(p))[0].startswith(prefix)]
        stored = next(store.readable(reversed(matching)), None)
        if stored is not None:
            return stored
    stored = store.find_label(host, selector)
    if stored is not None:
        return stored
    labels = ", ".join(store.labels(host)) or "none"
    raise UserError(
        f"{ref}: no readable snapshot of {name} labelled or timed {selector!r} "
        f"(labels: {labels}; also latest, ~N){_skipped(store, host)}"
    )


def _bare_host(store: SnapshotStore, word: str) -> str:
    """A bare word is no REF (``diff gpu01 gpu01@latest`` is a likely typo for gpu01@good):
    say what it could have meant."""
    if os.sep in word:
        return f"{word}: no such snapshot file"
    labels = store.labels(word) if store.paths(word) else []
    named = f"{word}@<label> ({', '.join(labels)})" if labels else f"{word}@<label>"
    return (f"{word!r} names no snapshot: write {word}@latest, {word}@~N, {named}, "
            f"{word}@<timestamp> or a snapshot file")


def _shown_host(store: SnapshotStore, host: str) -> str:
    name = store.name_of(host)
    return repr(host) if name == host else f"{host!r} (stored as {name!r})"


def _skipped(store: SnapshotStore, host: str) -> str:
    count = len(store.unreadable(host))
    return f"; {count} unreadable file(s) skipped" if count else ""
