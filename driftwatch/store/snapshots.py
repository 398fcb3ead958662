"""The snapshot store: ``<store>/<host folder>/<UTC time>[suffix].json``, one file per snapshot.

All of the store's I/O goes through this class and its backend (backend.py): a local
folder or an object store. Commands never build paths inside it.

- **Damage.** A snapshot that cannot be read is skipped when looking for the latest one, a
  label, ``~N`` or a timestamp, and recorded: commands print one warning naming each
  (``take_warnings``), ``check`` counts them per host. A file named explicitly is an error.
- **local.** With ``local_name`` set (the machine's hostname by default), the target
  ``local`` is stored under that name, so a thousand nodes writing to one store never
  collide; the ``local`` folder older versions wrote is still read as that host's.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError
from pydantic_core import from_json

from driftwatch.errors import StoreError
from driftwatch.model import SCHEMA_VERSION, Snapshot
from driftwatch.store.backend import Backend, Location
from driftwatch.store.local import LocalBackend
from driftwatch.store.names import (
    host_dir_name,
    host_from_dir_name,
    is_snapshot_name,
    order_key,
    snapshot_stem,
)

LOCAL = "local"


@dataclass(frozen=True)
class StoredSnapshot:
    path: Location
    snapshot: Snapshot


def is_url(store: str) -> bool:
    return "://" in store


def open_backend(store: str | Path, options: dict[str, str] | None = None) -> Backend:
    """A folder (or ``file://`` URL) is a local store; any other URL an object store (fsspec)."""
    text = str(store)
    if not is_url(text):
        return LocalBackend(text)
    scheme, _, rest = text.partition("://")
    if scheme.lower() == "file":
        return LocalBackend(rest or "/")
    from driftwatch.store.objects import ObjectBackend  # fsspec is an optional extra

    return ObjectBackend(text, options)


class SnapshotStore:
    def __init__(
        self, store: Backend | str | Path, *, options: dict[str, str] | None = None, local_name: str = LOCAL
    ) -> None:
        """``store``: a folder or a store URL (see ``open_backend``), or a backend."""
        backend = open_backend(store, options) if isinstance(store, (str, Path)) else store
        self.backend = backend
        self.root = backend.root
        self.local_name = local_name  # what the target `local` is stored under
        self._guard = threading.Lock()  # `check` works on several hosts in threads
        self._unreadable: dict[Location, tuple[str | None, str]] = {}  # every unreadable file seen: folder, why
        self._pending: list[str] = []  # warnings not yet taken by the command
        self._prepared = threading.Lock()  # held while the backend prepares: other threads wait
        self._ready = False

    # -- names -----------------------------------------------------------------------
    def name_of(self, host: str) -> str:
        """The name ``host`` is stored under: ``local`` is this machine's ``local_name``."""
        return self.local_name if host == LOCAL else host

    def _folders(self, host: str) -> list[str]:
        name = self.name_of(host)
        folders = [host_dir_name(name)]
        if name == self.local_name != LOCAL:  # written as `local` by an older driftwatch
            folders.append(host_dir_name(LOCAL))
        return folders

    def location(self, host: str, name: str) -> Location:
        """Where the file ``name`` of ``host`` is (or would be)."""
        return self.backend.location(host_dir_name(self.name_of(host)), name)

    # -- what went wrong while reading ------------------------------------------
    def unreadable(self, host: str) -> list[str]:
        """A warning per unreadable snapshot file of ``host`` seen so far, naming the file and why."""
        folders = set(self._folders(host))
        with self._guard:
            return [why for folder, why in self._unreadable.values() if folder in folders]

    def take_warnings(self) -> list[str]:
        """Warnings recorded since the last call, each once, for the command to print."""
        with self._guard:
            taken, self._pending = self._pending, []
        return taken

    def _note(self, warning: str) -> None:
        with self._guard:
            self._pending.append(warning)

    def load(self, location: Location) -> Snapshot:
        """Read and validate one snapshot file of this store; every failure names it."""
        return parse_snapshot(self._backend().read(location), location)

    def _load_or_skip(self, location: Location) -> Snapshot | None:
        try:
            return self.load(location)
        except StoreError as exc:
            self.skipped(location, str(exc))
            return None

    def skipped(self, location: Location, error: str) -> None:
        """Record an unreadable snapshot file (warned about once)."""
        warning = f"skipped unreadable snapshot {error}"
        with self._guard:
            if location not in self._unreadable:
                self._unreadable[location] = (self.backend.folder_of(location), warning)
                self._pending.append(warning)

    def _backend(self) -> Backend:
        with self._prepared:
            if not self._ready:
                self._ready = True
                for warning in self.backend.prepare():
                    self._note(warning)
        return self.backend

    # -- writing -------------------------------------------------------------------
    def ensure_writable(self) -> None:
        """Fail now, naming the store, if snapshots could not be written to it (before connecting)."""
        self.backend.ensure_writable()

    def lock(self, host: str, *, timeout: float) -> AbstractContextManager[None]:
        """Hold ``host``'s lock (overlapping cron runs take turns); ``filelock.Timeout`` if held too long."""
        return self._backend().lock(host_dir_name(self.name_of(host)), timeout=timeout)

    def save(self, snapshot: Snapshot) -> Location:
        folder = host_dir_name(self.name_of(snapshot.host.name))
        data = snapshot.model_dump_json(indent=1).encode()
        return self._backend().create(folder, snapshot_stem(snapshot.taken_at), data)

    def rewrite(self, location: Location, snapshot: Snapshot) -> None:
        """Replace an existing snapshot file atomically (e.g. to change its labels)."""
        self._backend().replace(location, snapshot.model_dump_json(indent=1).encode())

    def delete(self, location: Location) -> None:
        self._backend().delete(location)

    def clean_temps(self, host: str) -> list[Location]:
        return [p for folder in self._folders(host) for p in self._backend().clean_temps(folder)]

    def read_state(self, host: str, name: str) -> bytes | None:
        """A small state file of ``host`` (e.g. what was last alerted); None if absent or unreadable."""
        return self._backend().read_state(host_dir_name(self.name_of(host)), name)

    def write_state(self, host: str, name: str, data: bytes) -> None:
        self._backend().write_state(host_dir_name(self.name_of(host)), name, data)

    # -- reading -------------------------------------------------------------------
    def inventory(self) -> dict[str, list[Location]]:
        """Every host with snapshot files (readable or not), each oldest first, from one listing."""
        self.backend.check_readable()
        found: dict[str, list[tuple[str, str]]] = {}
        for folder, names in self._backend().listing().items():
            host = self.local_name if folder == LOCAL else host_from_dir_name(folder)
            found.setdefault(host, []).extend((folder, n) for n in names if is_snapshot_name(n))
        return {host: self._sorted(found[host]) for host in sorted(found) if found[host]}

    def hosts(self) -> list[str]:
        """The names of the hosts that have snapshot files (readable or not)."""
        return list(self.inventory())

    def paths(self, host: str) -> list[Location]:
        """Snapshot files of ``host``, oldest first, readable or not (one listing of its folder)."""
        self.backend.check_readable()
        backend = self._backend()
        return self._sorted([(f, n) for f in self._folders(host) for n in backend.names(f) if is_snapshot_name(n)])

    def _sorted(self, files: list[tuple[str, str]]) -> list[Location]:
        """Oldest first by the time in the name (this machine's folder and the old `local` together)."""
        return [self.backend.location(f, n) for f, n in sorted(files, key=lambda fn: order_key(fn[1]))]

    def readable(self, paths: Iterable[Location]) -> Iterator[StoredSnapshot]:
        """The snapshots among ``paths`` that can be read, in that order; others are skipped and recorded."""
        for path in paths:
            snapshot = self._load_or_skip(path)
            if snapshot is not None:
                yield StoredSnapshot(path, snapshot)

    def newest_first(self, host: str) -> Iterator[StoredSnapshot]:
        return self.readable(reversed(self.paths(host)))

    def latest(self, host: str) -> StoredSnapshot | None:
        """The newest readable snapshot of ``host``."""
        return next(self.newest_first(host), None)

    def find_label(self, host: str, label: str) -> StoredSnapshot | None:
        """The newest readable snapshot of ``host`` carrying ``label``."""
        return next((s for s in self.newest_first(host) if label in s.snapshot.labels), None)

    def labels(self, host: str) -> list[str]:
        found: list[str] = []
        for stored in self.readable(self.paths(host)):
            found.extend(label for label in stored.snapshot.labels if label not in found)
        return found


def parse_snapshot(raw: bytes, where: Location) -> Snapshot:
    """Validate one snapshot document; every failure names ``where`` it came from."""
    try:
        data = from_json(raw)  # pydantic-core's parser: half the time of json.loads on a big snapshot
    except (ValueError, UnicodeDecodeError) as exc:
        raise StoreError(f"{where}: not a driftwatch snapshot (corrupt or truncated JSON: {exc})") from exc
    return validate_snapshot(data, where)


def validate_snapshot(data: object, where: Location) -> Snapshot:
    if not isinstance(data, dict) or "schema_version" not in data:
        raise StoreError(f"{where}: not a driftwatch snapshot (no schema_version)")
    version = data["schema_version"]
    if isinstance(version, int) and version > SCHEMA_VERSION:
        raise StoreError(
            f"{where}: written by a newer driftwatch (schema {version}, this one reads {SCHEMA_VERSION}); upgrade driftwatch"
        )
    try:
        snapshot = Snapshot.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        at = ".".join(str(p) for p in err["loc"])
        raise StoreError(f"{where}: not a valid driftwatch snapshot ({at}: {err['msg']})") from exc
    return _redacted_if_old(snapshot)


def _redacted_if_old(snapshot: Snapshot) -> Snapshot:
    """Snapshots of schema 1 were stored before the full redaction rules: redact them as
    they are read, so no command prints, diffs or sends what they kept verbatim."""
    if snapshot.schema_version >= 2:
        return snapshot
    from driftwatch.redact import redact_stored_probe, redact_value  # only old stores pay for it

    for name, record in snapshot.probes.items():
        record.facts = redact_stored_probe(name, record.facts)
        record.error = redact_value(record.error) if record.error else record.error
    snapshot.schema_version = SCHEMA_VERSION  # a rewrite (a new label) stores it redacted
    return snapshot
