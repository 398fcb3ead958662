"""The store as a local folder: ``<root>/<host folder>/<UTC time>.json``.

- **Writes** go to a temp file in the host folder and are hard-linked into place, which
  fails instead of overwriting when two writers pick the same name: concurrent cron runs
  never clobber each other, and a crash never leaves half a file under a snapshot's name.
  Folders are created 700 and files 600 whatever the umask: snapshots hold environment data.
- **Locks** are ``<host folder>/.lock`` (filelock), so overlapping runs take turns.
- **Old layout.** Stores written with the old naming (unsafe characters replaced by ``_``,
  so ``a/b`` and ``a_b`` shared ``a_b``) are upgraded once, the first time a command opens
  them with write access: each snapshot moves to the folder of the host recorded inside it.
- Disk full, a read-only or missing store: ``StoreError`` naming the store, never a traceback.
- **Reads** are capped (``max_snapshot_bytes``) and only of regular files: a character
  device, FIFO or socket planted in the store (or named as a REF) is refused unopened.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


from driftwatch.errors import StoreError, UserError
from driftwatch.fileio import clean_stale_temps, make_dir, replace_file, write_temp
from driftwatch.store.backend import DEFAULT_MAX_FILE_BYTES, Location, over_cap
from driftwatch.store.names import SUFFIX, host_dir_name, is_snapshot_name, legacy_dir_name

LAYOUT_MARK = ".driftwatch-layout"  # present once host folders use the percent-encoded names
DIR_MODE, FILE_MODE = 0o700, 0o600


class LocalBackend:
    def __init__(self, root: str | Path, *, max_bytes: int = DEFAULT_MAX_FILE_BYTES) -> None:
        self.root: Path = Path(root).expanduser()
        self.max_bytes = max_bytes

    def location(self, folder: str, name: str) -> Path:
        return self.root / folder / name

    def folder_of(self, location: Location) -> str | None:
        path = Path(location)
        return path.parent.name if path.parent.parent == self.root else None

    # -- the root --------------------------------------------------------------------
    def _root_problem(self) -> str | None:
        if "\0" in str(self.root):
            return "its path contains a NUL character"
        if self.root.exists() and not self.root.is_dir():
            return "it is a file, not a folder"
        return None

    def check_readable(self) -> None:
        problem = self._root_problem()
        if problem:
            raise UserError(f"snapshot store {shown(self.root)} cannot be read: {problem}")

    def ensure_writable(self) -> None:
        problem = self._root_problem()
        if problem is None:
            try:
                if not self.root.is_dir():  # created by the first save; a failed run leaves nothing behind
                    problem = _uncreatable(self.root)
                else:  # a real write: full, read-only and permissions all show
                    write_temp(self.root, b"\n", mode=FILE_MODE).unlink()
            except OSError as exc:
                problem = _why(exc)
        if problem is not None:
            raise StoreError(f"snapshot store {shown(self.root)} cannot be written: {problem}")

    def _make_folder(self, folder: str) -> Path:
        if not self.root.is_dir():
            make_dir(self.root, DIR_MODE)
            _write_mark(self.root)  # a new store starts with the current naming
        path = self.root / folder
        make_dir(path, DIR_MODE)
        return path

    # -- reading -----------------------------------------------------------------------
    def names(self, folder: str) -> list[str]:
        path = self.root / folder
        if not path.is_dir():
            return []
        return [p.name for p in path.iterdir()]

    def listing(self) -> dict[str, list[str]]:
        if not self.root.is_dir():
            return {}
        return {p.name: self.names(p.name) for p in _host_folders(self.root)}

    def read(self, location: Location) -> bytes:
        return read_file(location, self.max_bytes)

    def head(self, location: Location, size: int) -> tuple[bytes, int | None]:
        return read_head(location, size)

    def read_state(self, folder: str, name: str) -> bytes | None:
        try:
            return read_file(self.root / folder / name, self.max_bytes)
        except StoreError:
            return None

    # -- writing -----------------------------------------------------------------------
    def create(self, folder: str, stem: str, data: bytes) -> Path:
        path = self.root / folder
        try:
            self._make_folder(folder)
            clean_stale_temps(path)
            tmp = write_temp(path, data, mode=FILE_MODE)
            try:
                return _link_free_name(tmp, path, stem)
            finally:
                os.unlink(tmp)
        except OSError as exc:
            raise StoreError(f"{path}: could not store the snapshot: {_why(exc)}") from exc

    def replace(self, location: Location, data: bytes) -> None:
        path = Path(location)
        try:
            clean_stale_temps(path.parent)
            replace_file(path, data, mode=FILE_MODE)
        except OSError as exc:
            raise StoreError(f"{path}: could not rewrite the snapshot: {_why(exc)}") from exc

    def delete(self, location: Location) -> None:
        try:
            Path(location).unlink(missing_ok=True)
        except OSError as exc:
            raise StoreError(f"{location}: could not delete the snapshot: {_why(exc)}") from exc

    def write_state(self, folder: str, name: str, data: bytes) -> None:
        try:
            path = self._make_folder(folder)
            clean_stale_temps(path)
            replace_file(path / name, data, mode=FILE_MODE)
        except OSError as exc:
            raise StoreError(f"{self.root / folder / name}: could not be written: {_why(exc)}") from exc

    def clean_temps(self, folder: str) -> list[Location]:
        return list(clean_stale_temps(self.root / folder))

    @contextmanager
    def lock(self, folder: str, *, timeout: float) -> Iterator[None]:
        from filelock import FileLock  # only check and accept take locks: ~8 ms not paid by snapshot
        from filelock import Timeout as LockTimeout

        try:
            path = self._make_folder(folder)
            lock = FileLock(str(path / ".lock"), timeout=timeout, mode=FILE_MODE)
            lock.acquire()
        except LockTimeout:
            raise
        except OSError as exc:
            raise StoreError(f"{self.root / folder}: cannot take the host's lock: {_why(exc)}") from exc
        try:
            yield
        finally:
            lock.release()

    # -- stores written with the old folder names ---------------------------------
    def prepare(self) -> list[str]:
        """Move snapshots out of old-style folders, once per store, under a store-wide lock.

        A snapshot moves only when it sits in the folder the old naming gave its host
        (recorded inside it) and that differs from the new one, so a mixed ``a_b`` folder
        is split between ``a/b`` and ``a_b``. Unreadable files cannot be attributed and
        stay. A read-only store is read as it is, with one warning.
        """
        if "\0" in str(self.root) or not self.root.is_dir() or (self.root / LAYOUT_MARK).exists():
            return []
        from filelock import FileLock  # once per old store

        try:
            with FileLock(str(self.root / ".layout.lock"), timeout=60, mode=FILE_MODE):
                if not (self.root / LAYOUT_MARK).exists():
                    for folder in _host_folders(self.root):
                        self._move_legacy(folder)
                    _write_mark(self.root)
        except OSError as exc:  # filelock.Timeout included
            # Only an old name with a `_` can stand for a name the new naming writes differently.
            if any("_" in p.name for p in _host_folders(self.root)):
                return [
                    f"snapshot store {self.root} uses the old host folder names and could not be upgraded "
                    f"({_why(exc)}): hosts named with characters other than A-Z a-z 0-9 . _ - are listed under "
                    "their old folder names until a command with write access runs"
                ]
        return []

    def _move_legacy(self, folder: Path) -> None:
        owners: set[str] = set()
        moved: set[str] = set()
        for path in sorted(p for p in folder.iterdir() if is_snapshot_name(p.name)):
            host = _recorded_host(path)
            if host is None:
                continue
            owners.add(host)
            new = host_dir_name(host)
            if new == folder.name or legacy_dir_name(host) != folder.name:
                continue
            target = self.root / new
            make_dir(target, DIR_MODE)
            _link_free_name(path, target, path.name[: -len(SUFFIX)])
            path.unlink()
            moved.add(host)
        if len(owners) == 1 and moved == owners:  # the folder was one host's: its alert state goes along
            target = self.root / host_dir_name(owners.pop())
            for state in folder.glob(".alert-*.json"):
                if not (target / state.name).exists():
                    os.replace(state, target / state.name)


_NOT_FILES = ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO"),
              (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder"))


def read_file(location: Location, cap: int = DEFAULT_MAX_FILE_BYTES) -> bytes:
    """The bytes of the regular file ``location``; a StoreError, unread, past ``cap`` bytes."""
    data, size = _read(location, cap, whole=True)
    if len(data) > cap:  # the size stat gave was wrong (a file that grows)
        raise StoreError(over_cap(location, max(size, len(data)), cap))
    return data


def read_head(location: Location, size: int) -> tuple[bytes, int]:
    """The first ``size`` bytes of the regular file ``location``, and its size."""
    data, whole = _read(location, size, whole=False)
    return data[:size], whole


def _read(location: Location, cap: int, *, whole: bool) -> tuple[bytes, int]:
    """Up to ``cap`` + 1 bytes of a regular file, and the size stat gives it."""
    try:
        # O_NONBLOCK: opening a FIFO would wait for a writer; checked again once open (a swap).
        _refuse_special(location, os.stat(location).st_mode)
        fd = os.open(location, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError as exc:
        raise StoreError(f"{location}: cannot read snapshot: {exc.strerror or exc}") from exc
    try:
        info = os.fstat(fd)
        _refuse_special(location, info.st_mode)
        if whole and info.st_size > cap:
            raise StoreError(over_cap(location, info.st_size, cap))
        chunks, read = [], 0
        while read <= cap:
            chunk = os.read(fd, min(1 << 20, cap + 1 - read))
            if not chunk:
                break
            chunks.append(chunk)
            read += len(chunk)
    except OSError as exc:
        raise StoreError(f"{location}: cannot read snapshot: {exc.strerror or exc}") from exc
    finally:
        os.close(fd)
    return b"".join(chunks), info.st_size


def _refuse_special(location: Location, mode: int) -> None:
    for test, kind in _NOT_FILES:
        if test(mode):
            raise StoreError(f"{location}: not a snapshot file: it is {kind}")


def _host_folders(root: Path) -> list[Path]:
    return [p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")]


def _recorded_host(path: Path) -> str | None:
    """The host name a snapshot file records, read without validating the rest (upgrading reads every file)."""
    try:
        name = json.loads(read_file(path))["host"]["name"]
    except (StoreError, ValueError, TypeError, KeyError):
        return None
    return name if isinstance(name, str) and name else None


def _link_free_name(src: Path, folder: Path, stem: str) -> Path:
    """Hard-link ``src`` into ``folder`` as ``stem.json`` or the first free ``stem-N.json``."""
    for attempt in range(100):
        final = folder / (f"{stem}{SUFFIX}" if attempt == 0 else f"{stem}-{attempt}{SUFFIX}")
        try:
            os.link(src, final)
            return final
        except FileExistsError:
            continue
    raise FileExistsError(f"no free snapshot name for {stem} in {folder}")


def _write_mark(root: Path) -> None:
    replace_file(root / LAYOUT_MARK, b"host folders: percent-encoded names\n", mode=FILE_MODE)


def shown(path: Path | str) -> str:
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
