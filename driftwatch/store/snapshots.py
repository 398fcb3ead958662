"""The snapshot store: ``<store>/<host folder>/<UTC time>[suffix].json``, one file per snapshot.

All of the store's I/O goes through this class and its backend (backend.py): a local
folder or an object store. Commands never build paths inside it.

- **Damage.** A snapshot that cannot be read is skipped when looking for the latest one, a
  label, ``~N`` or a timestamp, and recorded: commands print one warning naming each
  (``take_warnings``), ``check`` counts them per host. A file named explicitly is an error.
- **Clocks that lie.** A snapshot named more than ``FUTURE_TOLERANCE`` ahead of this
  machine's clock (a pushing node whose clock ran ahead) is not believed to be the newest:
  it comes after every believable one wherever the newest is looked for (``latest``,
  ``~N``, labels, ``fleet``), with one warning naming it. Otherwise it would stay
  ``latest`` until the clock caught up, for years.
- **local.** With ``local_name`` set (the machine's hostname by default), the target
  ``local`` is stored under that name, so a thousand nodes writing to one store never
  collide; the ``local`` folder older versions wrote is still read as that host's.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import from_json

from driftwatch.errors import StoreError
from driftwatch.model import SCHEMA_VERSION, HostIdentity, Snapshot, utcnow
from driftwatch.store.backend import DEFAULT_MAX_FILE_BYTES, Backend, Location, over_cap
from driftwatch.store.local import LocalBackend
from driftwatch.store.names import (
    host_dir_name,
    host_from_dir_name,
    is_snapshot_name,
    order_key,
    snapshot_stem,
    stamp_time,
)

LOCAL = "local"
# How far ahead of this machine's clock a snapshot's time may be and still be believed:
# clocks a few minutes apart are normal between the node that wrote it and the reader.
FUTURE_TOLERANCE = timedelta(hours=1)


@dataclass(frozen=True)
class StoredSnapshot:
    path: Location
    snapshot: Snapshot


@dataclass(frozen=True)
class ListedSnapshot:
    """One file as ``list`` shows it: from its name, its size and its head, never read whole."""

    path: Location
    size: int | None
    taken_at: datetime | None
    labels: list[str]
    error: str | None = None  # why it cannot be used


class SnapshotHead(BaseModel):
    """What a snapshot says before its probes: enough to list it."""

    model_config = ConfigDict(extra="ignore")

    schema_version: int
    host: HostIdentity
    taken_at: datetime
    labels: list[str] = Field(default_factory=list)


# The head of a snapshot file: every field before "probes", which comes last (model order).
# A few hundred bytes; read in 4 KiB, and again in up to 64 KiB where that was not enough.
HEAD_START, HEAD_BYTES = 4096, 64 * 1024
# The top-level "probes" key: inside a JSON string a quote is escaped, so `,"probes":`
# (any spacing) can only be a key, and the fields before it hold no object with such a key.
_PROBES_KEY = re.compile(rb'[{,]\s*"probes"\s*:')


def is_url(store: str) -> bool:
    return "://" in store


def open_backend(
    store: str | Path, options: dict[str, str] | None = None, *, max_bytes: int = DEFAULT_MAX_FILE_BYTES
) -> Backend:
    """A folder (or ``file://`` URL) is a local store; any other URL an object store (fsspec).
    No file of it is read past ``max_bytes``."""
    text = str(store)
    if not is_url(text):
        return LocalBackend(text, max_bytes=max_bytes)
    scheme, _, rest = text.partition("://")
    if scheme.lower() == "file":
        return LocalBackend(rest or "/", max_bytes=max_bytes)
    from driftwatch.store.objects import ObjectBackend  # fsspec is an optional extra

    return ObjectBackend(text, options, max_bytes=max_bytes)


class SnapshotStore:
    def __init__(
        self, store: Backend | str | Path, *, options: dict[str, str] | None = None, local_name: str = LOCAL,
        max_bytes: int = DEFAULT_MAX_FILE_BYTES,
    ) -> None:
        """``store``: a folder or a store URL (see ``open_backend``), or a backend."""
        backend = open_backend(store, options, max_bytes=max_bytes) if isinstance(store, (str, Path)) else store
        self.backend = backend
        self.root = backend.root
        self.local_name = local_name  # what the target `local` is stored under
        self._guard = threading.Lock()  # `check` works on several hosts in threads
        self._unreadable: dict[Location, tuple[str | None, str]] = {}  # every unreadable file seen: folder, why
        self._ahead: dict[Location, tuple[str | None, str]] = {}  # files dated ahead of this clock: folder, warning
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

    def ahead(self, host: str) -> list[str]:
        """A warning per snapshot file of ``host`` seen dated ahead of this machine's clock."""
        folders = set(self._folders(host))
        with self._guard:
            return [why for folder, why in self._ahead.values() if folder in folders]

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
        """Readable snapshots of ``host``, newest believable first (see the module doc)."""
        return self.readable(self.newest_order(self.paths(host)))

    def newest_order(self, paths: list[Location]) -> list[Location]:
        """``paths`` (oldest first) newest first, those dated ahead of this machine's clock
        last, each of them warned about once."""
        now = utcnow()
        believable: list[Location] = []
        ahead: list[Location] = []
        for path in reversed(paths):
            taken = stamp_time(str(path).rsplit("/", 1)[-1])
            if taken is None or taken <= now + FUTURE_TOLERANCE:
                believable.append(path)
                continue
            ahead.append(path)
            warning = (
                f"{path} is dated {taken:%Y-%m-%d %H:%M} UTC, ahead of this machine's clock "
                f"({now:%Y-%m-%d %H:%M} UTC): not taken as the newest snapshot (the clock of the "
                "machine that wrote it ran ahead?)"
            )
            with self._guard:
                if path not in self._ahead:
                    self._ahead[path] = (self.backend.folder_of(path), warning)
                    self._pending.append(warning)
        return believable + ahead

    def latest(self, host: str) -> StoredSnapshot | None:
        """The newest readable snapshot of ``host``."""
        return next(self.newest_first(host), None)

    def find_label(self, host: str, label: str) -> StoredSnapshot | None:
        """The newest readable snapshot of ``host`` carrying ``label``."""
        return next((s for s in self.newest_first(host) if label in s.snapshot.labels), None)

    def listed(self, path: Location) -> ListedSnapshot:
        """``path`` as ``list`` shows it: its head and size are read, not the whole file."""
        size = None
        try:
            raw, size = self._backend().head(path, HEAD_START)
            if size is not None and size > self.backend.max_bytes:  # no command will read it
                raise StoreError(over_cap(path, size, self.backend.max_bytes))
            if _PROBES_KEY.search(raw) is None and len(raw) == HEAD_START:  # a long host name, many labels
                raw, size = self._backend().head(path, HEAD_BYTES)
            head = parse_head(raw, path)
        except StoreError as exc:
            return ListedSnapshot(path, size, stamp_time(str(path).rsplit("/", 1)[-1]), [], str(exc))
        return ListedSnapshot(path, size, head.taken_at, head.labels)

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


def parse_head(raw: bytes, where: Location) -> SnapshotHead:
    """The fields of a snapshot before its probes, from the file's first bytes."""
    found = _PROBES_KEY.search(raw)
    if found is None:
        raise StoreError(f"{where}: not a driftwatch snapshot (no probes in its first {HEAD_BYTES // 1024} KiB)")
    head = raw[: found.start()] + (b"{}" if raw[found.start()] == ord("{") else b"}")
    try:
        data = from_json(head)
    except (ValueError, UnicodeDecodeError) as exc:
        raise StoreError(f"{where}: not a driftwatch snapshot (corrupt JSON: {exc})") from exc
    _check_version(data, where)
    return _validated(SnapshotHead, data, where)


def validate_snapshot(data: object, where: Location) -> Snapshot:
    _check_version(data, where)
    return _redacted_if_old(_validated(Snapshot, data, where))


def _check_version(data: object, where: Location) -> None:
    if not isinstance(data, dict) or "schema_version" not in data:
        raise StoreError(f"{where}: not a driftwatch snapshot (no schema_version)")
    version = data["schema_version"]
    if isinstance(version, int) and version > SCHEMA_VERSION:
        raise StoreError(
            f"{where}: written by a newer driftwatch (schema {version}, this one reads {SCHEMA_VERSION}); upgrade driftwatch"
        )


M = TypeVar("M", bound=BaseModel)


def _validated(model: type[M], data: object, where: Location) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        at = ".".join(str(p) for p in err["loc"])
        raise StoreError(f"{where}: not a valid driftwatch snapshot ({at}: {err['msg']})") from exc


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
