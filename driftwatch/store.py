"""The snapshot store: ``<store>/<host folder>/<UTC timestamp>.json``, one file per snapshot.

All of the store's file I/O is in this module (commands never build paths inside it), so a
later object-store backend replaces these methods, not the commands.

- **Names.** A host's folder is its name with every character outside ``[A-Za-z0-9._-]``
  percent-encoded (and a leading dot): ``gpu01`` stays ``gpu01``, ``root@10.0.0.1:22`` is
  ``root%4010.0.0.1%3A22``, and no two hosts share a folder. Stores written with the old
  naming (unsafe characters replaced by ``_``, so ``a/b`` and ``a_b`` shared ``a_b``) are
  upgraded once, the first time a command opens them with write access: each snapshot
  moves to the folder of the host recorded inside it (see ``_upgrade_layout``).
- **Writes** go to a temp file in the host folder and are hard-linked into place, which
  fails instead of overwriting when two writers pick the same name: concurrent cron runs
  never clobber each other, and a crash never leaves half a file under a snapshot's name.
  Folders are created 700 and files 600 whatever the umask: snapshots hold environment data.
- **Damage.** A snapshot that cannot be read is skipped when looking for the latest one, a
  label, ``~N`` or a timestamp, and recorded: commands print one warning naming each
  (``take_warnings``), ``check`` counts them per host. A file named explicitly is an error.
  Disk full, a read-only or missing store: ``StoreError`` naming the store, never a traceback.
"""

from __future__ import annotations

import errno
import json
import os
import re
import string
import threading
import unicodedata
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from urllib.parse import unquote

from filelock import FileLock
from filelock import Timeout as LockTimeout
from pydantic import ValidationError

from driftwatch.errors import StoreError, UserError
from driftwatch.fileio import clean_stale_temps, make_dir, replace_file, write_temp
from driftwatch.model import SCHEMA_VERSION, Snapshot

_SAFE = frozenset(string.ascii_letters + string.digits + "._-")
_LEGACY_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
_STAMP = "%Y%m%dT%H%M%S.%fZ"
# What a timestamp selector looks like once `-` and `:` are dropped: 2026, 20260219T1001,
# 20260219T100100.5Z ... (file names are 20260219T100100.500000Z.json).
_STAMP_PREFIX = re.compile(r"\d{1,8}(T\d{0,6}(\.\d{0,6})?Z?)?")
_LABEL_MAX = 100
LAYOUT_MARK = ".driftwatch-layout"  # present once host folders use the percent-encoded names
DIR_MODE, FILE_MODE = 0o700, 0o600


def host_dir_name(host: str) -> str:
    """The injective, readable folder (and file name part) of a host name; see the module doc."""
    if not host:
        raise UserError("empty host name")
    encoded = "".join(c if c in _SAFE else _percent(c) for c in host)
    return "%2E" + encoded[1:] if encoded.startswith(".") else encoded


def host_from_dir_name(name: str) -> str:
    return unquote(name, errors="surrogatepass")


def _percent(char: str) -> str:
    return "".join(f"%{byte:02X}" for byte in char.encode("utf-8", "surrogatepass"))


def _legacy_dir_name(host: str) -> str:
    """The folder name driftwatch used before names were encoded (lossy: only for upgrading)."""
    return _LEGACY_UNSAFE.sub("_", host).strip(".") or "_"


def is_timestamp_prefix(selector: str) -> bool:
    return _STAMP_PREFIX.fullmatch(re.sub(r"[-:]", "", selector)) is not None


def validate_label(label: str) -> str:
    """``label`` if it can name a snapshot unambiguously in a REF; else a one-line UserError."""
    problem = None
    if not label.strip():
        problem = "it is empty"
    elif label != label.strip():
        problem = "it starts or ends with a space"
    elif any(unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") for c in label):
        problem = "it has control characters"
    elif "/" in label or ".." in label or "@" in label:
        problem = "it has '/', '..' or '@'"
    elif label == "latest" or label.startswith("~"):
        problem = "latest and ~N already select snapshots"
    elif is_timestamp_prefix(label):
        problem = "it reads as a timestamp (HOST@2026... selects by time)"
    elif len(label) > _LABEL_MAX:
        problem = f"it is over {_LABEL_MAX} characters"
    if problem:
        raise UserError(f"bad label {label!r}: {problem}; labels are names like good or baseline-0219")
    return label


@dataclass(frozen=True)
class StoredSnapshot:
    path: Path
    snapshot: Snapshot


class SnapshotStore:
    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).expanduser()
        self._guard = threading.Lock()  # `check` works on several hosts in threads
        self._unreadable: dict[Path, str] = {}  # every unreadable file seen, with why
        self._pending: list[str] = []  # warnings not yet taken by the command
        self._layout_lock = threading.Lock()  # held while the layout is upgraded: other threads wait
        self._layout_done = False

    # -- what went wrong while reading ------------------------------------------
    def unreadable(self, host: str) -> list[str]:
        """A warning per unreadable snapshot file of ``host`` seen so far, naming the file and why."""
        folder = self.host_dir(host)
        with self._guard:
            return [why for path, why in self._unreadable.items() if path.parent == folder]

    def take_warnings(self) -> list[str]:
        """Warnings recorded since the last call, each once, for the command to print."""
        with self._guard:
            taken, self._pending = self._pending, []
        return taken

    def _note(self, warning: str) -> None:
        with self._guard:
            self._pending.append(warning)

    def _load_or_skip(self, path: Path) -> Snapshot | None:
        try:
            return load_snapshot(path)
        except StoreError as exc:
            warning = f"skipped unreadable snapshot {exc}"
            with self._guard:
                if path not in self._unreadable:
                    self._unreadable[path] = warning
                    self._pending.append(warning)
            return None

    # -- places ----------------------------------------------------------------------
    def host_dir(self, host: str) -> Path:
        self._upgrade_layout()
        return self.root / host_dir_name(host)

    def _root_problem(self) -> str | None:
        if "\0" in str(self.root):
            return "its path contains a NUL character"
        if self.root.exists() and not self.root.is_dir():
            return "it is a file, not a folder"
        return None

    def _make_host_dir(self, host: str) -> Path:
        if not self.root.is_dir():
            make_dir(self.root, DIR_MODE)
            _write_mark(self.root)  # a new store starts with the current naming
        folder = self.host_dir(host)
        make_dir(folder, DIR_MODE)
        return folder

    def ensure_writable(self) -> None:
        """Fail now, naming the store, if snapshots could not be written to it (before connecting)."""
        problem = self._root_problem()
        if problem is None:
            try:
                if not self.root.is_dir():  # created by the first save; a failed run leaves nothing behind
                    problem = _uncreatable(self.root)
                else:  # a real write: full, read-only and permissions all show
                    write_temp(self.root, b"\n", mode=FILE_MODE).unlink()
            except OSError as exc:
                problem = _why(exc)
        if problem is None:
            return
        raise StoreError(f"snapshot store {_shown(self.root)} cannot be written: {problem}")

    @contextmanager
    def lock(self, host: str, *, timeout: float) -> Iterator[None]:
        """Hold ``host``'s lock (overlapping cron runs take turns); ``filelock.Timeout`` if held too long."""
        try:
            folder = self._make_host_dir(host)
            lock = FileLock(str(folder / ".lock"), timeout=timeout, mode=FILE_MODE)
            lock.acquire()
        except LockTimeout:
            raise
        except OSError as exc:
            raise StoreError(f"{self.host_dir(host)}: cannot take the host's lock: {_why(exc)}") from exc
        try:
            yield
        finally:
            lock.release()

    # -- writing -------------------------------------------------------------------
    def save(self, snapshot: Snapshot) -> Path:
        folder = self.host_dir(snapshot.host.name)
        try:
            self._make_host_dir(snapshot.host.name)
            clean_stale_temps(folder)
            tmp = write_temp(folder, snapshot.model_dump_json(indent=1).encode(), mode=FILE_MODE)
            try:
                return _link_free_name(tmp, folder, snapshot.taken_at.strftime(_STAMP))
            finally:
                os.unlink(tmp)
        except OSError as exc:
            raise StoreError(f"{folder}: could not store the snapshot: {_why(exc)}") from exc

    def rewrite(self, path: Path, snapshot: Snapshot) -> None:
        """Replace an existing snapshot file atomically (e.g. to change its labels)."""
        try:
            clean_stale_temps(path.parent)
            replace_file(path, snapshot.model_dump_json(indent=1).encode(), mode=FILE_MODE)
        except OSError as exc:
            raise StoreError(f"{path}: could not rewrite the snapshot: {_why(exc)}") from exc

    def delete(self, path: Path) -> None:
        try:
            path.unlink(missing_ok=True)
        except OSError as exc:
            raise StoreError(f"{path}: could not delete the snapshot: {_why(exc)}") from exc

    def clean_temps(self, host: str) -> list[Path]:
        return clean_stale_temps(self.host_dir(host))

    def read_state(self, host: str, name: str) -> bytes | None:
        """A small state file of ``host`` (e.g. what was last alerted); None if absent or unreadable."""
        try:
            return (self.host_dir(host) / name).read_bytes()
        except OSError:
            return None

    def write_state(self, host: str, name: str, data: bytes) -> None:
        try:
            folder = self._make_host_dir(host)
            clean_stale_temps(folder)
            replace_file(folder / name, data, mode=FILE_MODE)
        except OSError as exc:
            raise StoreError(f"{self.host_dir(host) / name}: could not be written: {_why(exc)}") from exc

    # -- reading -------------------------------------------------------------------
    def hosts(self) -> list[str]:
        """The names of the hosts that have snapshot files (readable or not)."""
        self._check_root()
        if not self.root.is_dir():
            return []
        self._upgrade_layout()
        return sorted(host_from_dir_name(p.name) for p in self._host_folders() if _snapshot_files(p))

    def paths(self, host: str) -> list[Path]:
        """Snapshot files of ``host``, oldest first, readable or not."""
        self._check_root()
        return _snapshot_files(self.host_dir(host))

    def readable(self, paths: Iterable[Path]) -> Iterator[StoredSnapshot]:
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

    def _check_root(self) -> None:
        problem = self._root_problem()
        if problem:
            raise UserError(f"snapshot store {_shown(self.root)} cannot be read: {problem}")

    def _host_folders(self) -> list[Path]:
        return [p for p in self.root.iterdir() if p.is_dir() and not p.name.startswith(".")]

    # -- stores written with the old folder names ---------------------------------
    def _upgrade_layout(self) -> None:
        """Move snapshots out of old-style folders, once per store, under a store-wide lock.

        A snapshot moves only when it sits in the folder the old naming gave its host
        (recorded inside it) and that differs from the new one, so a mixed ``a_b`` folder
        is split between ``a/b`` and ``a_b``. Unreadable files cannot be attributed and
        stay. A read-only store is read as it is, with one warning.
        """
        with self._layout_lock:
            if self._layout_done:
                return
            self._layout_done = True
            if "\0" in str(self.root) or not self.root.is_dir() or (self.root / LAYOUT_MARK).exists():
                return
            try:
                with FileLock(str(self.root / ".layout.lock"), timeout=60, mode=FILE_MODE):
                    if not (self.root / LAYOUT_MARK).exists():
                        for folder in self._host_folders():
                            self._move_legacy(folder)
                        _write_mark(self.root)
            except OSError as exc:  # filelock.Timeout included
                self._layout_warning(exc)

    def _layout_warning(self, exc: OSError) -> None:
        # Only an old name with a `_` can stand for a name the new naming writes differently.
        if any("_" in p.name for p in self._host_folders()):
            self._note(
                f"snapshot store {self.root} uses the old host folder names and could not be upgraded "
                f"({_why(exc)}): hosts named with characters other than A-Z a-z 0-9 . _ - are listed under "
                "their old folder names until a command with write access runs"
            )

    def _move_legacy(self, folder: Path) -> None:
        owners: set[str] = set()
        moved: set[str] = set()
        for path in _snapshot_files(folder):
            host = _recorded_host(path)
            if host is None:
                continue
            owners.add(host)
            new = host_dir_name(host)
            if new == folder.name or _legacy_dir_name(host) != folder.name:
                continue
            target = self.root / new
            make_dir(target, DIR_MODE)
            _link_free_name(path, target, path.stem)
            path.unlink()
            moved.add(host)
        if len(owners) == 1 and moved == owners:  # the folder was one host's: its alert state goes along
            target = self.root / host_dir_name(owners.pop())
            for state in folder.glob(".alert-*.json"):
                if not (target / state.name).exists():
                    os.replace(state, target / state.name)


def _recorded_host(path: Path) -> str | None:
    """The host name a snapshot file records, read without validating the rest (upgrading reads every file)."""
    try:
        name = json.loads(path.read_bytes())["host"]["name"]
    except (OSError, ValueError, TypeError, KeyError):
        return None
    return name if isinstance(name, str) and name else None


def _snapshot_files(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    # Dot files are ours but not snapshots: locks, alert state, temp files.
    return sorted(p for p in folder.glob("*.json") if not p.name.startswith("."))


def _link_free_name(src: Path, folder: Path, stem: str) -> Path:
    """Hard-link ``src`` into ``folder`` as ``stem.json`` or the first free ``stem-N.json``."""
    for attempt in range(100):
        final = folder / (f"{stem}.json" if attempt == 0 else f"{stem}-{attempt}.json")
        try:
            os.link(src, final)
            return final
        except FileExistsError:
            continue
    raise FileExistsError(f"no free snapshot name for {stem} in {folder}")


def _write_mark(root: Path) -> None:
    replace_file(root / LAYOUT_MARK, b"host folders: percent-encoded names\n", mode=FILE_MODE)


def _shown(path: Path) -> str:
    """A path for a message: control characters (a NUL from the config file) as \\xNN."""
    return re.sub(r"[\x00-\x1f\x7f]", lambda m: f"\\x{ord(m.group()):02x}", str(path))


def _uncreatable(path: Path) -> str | None:
    """Why the missing folder ``path`` could not be created, judged on its nearest existing parent."""
    parent = next((p for p in path.parents if p.exists()), Path("."))
    if not parent.is_dir():
        return f"{parent} is a file, not a folder"
    fs = os.statvfs(parent)
    if fs.f_flag & os.ST_RDONLY:
        return os.strerror(errno.EROFS)
    if not os.access(parent, os.W_OK | os.X_OK):
        return os.strerror(errno.EACCES)
    if (fs.f_bfree if os.geteuid() == 0 else fs.f_bavail) == 0:
        return os.strerror(errno.ENOSPC)
    return None


def _why(exc: OSError) -> str:
    if isinstance(exc, FileExistsError) and exc.filename and Path(exc.filename).exists():
        return f"{exc.filename} is a file, not a folder"
    if isinstance(exc, NotADirectoryError):
        return f"a part of {exc.filename or 'the path'} is a file, not a folder"
    return exc.strerror or str(exc)


def load_snapshot(path: str | Path) -> Snapshot:
    """Read and validate one snapshot file; every failure names the file."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise StoreError(f"{path}: cannot read snapshot: {exc.strerror or exc}") from exc
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise StoreError(f"{path}: not a driftwatch snapshot (corrupt or truncated JSON: {exc})") from exc
    if not isinstance(data, dict) or "schema_version" not in data:
        raise StoreError(f"{path}: not a driftwatch snapshot (no schema_version)")
    version = data["schema_version"]
    if isinstance(version, int) and version > SCHEMA_VERSION:
        raise StoreError(
            f"{path}: written by a newer driftwatch (schema {version}, this one reads {SCHEMA_VERSION}); upgrade driftwatch"
        )
    try:
        snapshot = Snapshot.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise StoreError(f"{path}: not a valid driftwatch snapshot ({where}: {err['msg']})") from exc
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


def parse_ref(ref: str) -> tuple[str, str]:
    """Split ``HOST@SELECTOR``; a bare host means its latest snapshot."""
    host, sep, selector = ref.rpartition("@")
    if not sep:
        return ref, "latest"
    if not host or not selector:
        raise UserError(f"bad snapshot reference {ref!r}: expected HOST@LABEL, HOST@latest, HOST@~N or a file")
    return host, selector


def resolve_ref(store: SnapshotStore, ref: str) -> StoredSnapshot:
    """A snapshot file path, or HOST@latest / HOST@~N / HOST@LABEL / HOST@<timestamp prefix>.

    Unreadable files are skipped (and recorded, see ``take_warnings``) except a file named
    explicitly, which is an error naming it.
    """
    if ref.endswith(".json") or os.sep in ref and Path(ref).exists():
        return StoredSnapshot(Path(ref), load_snapshot(ref))
    host, selector = parse_ref(ref)
    paths = store.paths(host)
    if not paths:
        known = ", ".join(store.hosts()) or "none"
        raise UserError(f"no snapshots of {host!r} in {store.root} (hosts with snapshots: {known})")
    if selector == "latest" or re.fullmatch(r"~\d+", selector):
        back = 0 if selector == "latest" else int(selector[1:])
        found = list(islice(store.newest_first(host), back + 1))
        if len(found) <= back:
            raise UserError(f"{ref}: only {len(found)} readable snapshot(s) of {host!r}{_skipped(store, host)}")
        return found[back]
    # Labels cannot look like timestamps (validate_label), so a timestamp is never shadowed.
    if is_timestamp_prefix(selector):
        prefix = re.sub(r"[-:]", "", selector)
        stored = next(store.readable(reversed([p for p in paths if p.name.startswith(prefix)])), None)
        if stored is not None:
            return stored
    stored = store.find_label(host, selector)
    if stored is not None:
        return stored
    labels = ", ".join(store.labels(host)) or "none"
    raise UserError(
        f"{ref}: no readable snapshot of {host!r} labelled or timed {selector!r} "
        f"(labels: {labels}; also latest, ~N){_skipped(store, host)}"
    )


def _skipped(store: SnapshotStore, host: str) -> str:
    count = len(store.unreadable(host))
    return f"; {count} unreadable file(s) skipped" if count else ""
