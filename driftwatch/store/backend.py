"""The seam between the snapshot store and where its files live.

``SnapshotStore`` (snapshots.py) knows names, order, labels and what to skip; a backend
knows one medium and nothing about snapshots: a local folder (local.py) or an object
store reached through fsspec (objects.py). Both lay the store out the same way,
``<root>/<host folder>/<name>``, and address a file by ``(folder, name)``. A backend's
methods raise ``StoreError`` with a complete one-line message; nothing from the layer
below (OSError, botocore, aiohttp) crosses this seam.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path
from typing import Protocol, Union

# Where one file is: a local Path, or an object's URL (s3://bucket/prefix/gpu01/....json).
Location = Union[Path, str]
# The most read of one file of the store (config ``max_snapshot_bytes``): a big host's
# snapshot is ~2 MiB. A larger file (a 3 GB file named like a snapshot, a 400 MB object
# any node with write access put under a host prefix) is skipped and named, never read.
DEFAULT_MAX_FILE_BYTES = 128 * 1024 * 1024


def over_cap(location: Location, size: int, cap: int) -> str:
    """The message for a file of ``size`` bytes over the read cap."""
    limit = f"{cap >> 20} MiB" if cap % (1 << 20) == 0 else f"{cap} bytes"
    shown = f"{size / (1 << 20):.1f} MiB" if size >= 1 << 20 else f"{size} bytes"
    return f"{location}: {shown}, over the {limit} read cap (max_snapshot_bytes): not read"


class Backend(Protocol):
    max_bytes: int  # the read cap: no file is read past it

    @property
    def root(self) -> Location:
        """The store, as messages show it."""
        ...

    def location(self, folder: str, name: str) -> Location: ...

    def folder_of(self, location: Location) -> str | None:
        """The host folder ``location`` is in, if it is in this store."""
        ...

    def check_readable(self) -> None:
        """A one-line UserError if the store cannot be a store at all (a file in its place...)."""
        ...

    def prepare(self) -> list[str]:
        """One-time work before the first access (upgrading an old layout); warnings to show."""
        ...

    def names(self, folder: str) -> list[str]:
        """Every file name in one host folder (one listing of one prefix); [] if there is none."""
        ...

    def listing(self) -> dict[str, list[str]]:
        """Every host folder with its file names, read in as few listings as the medium allows."""
        ...

    def read(self, location: Location) -> bytes:
        """A whole file, up to the read cap (``StoreError`` beyond it, or for what is not a file)."""
        ...

    def head(self, location: Location, size: int) -> tuple[bytes, int | None]:
        """A file's first ``size`` bytes and its whole size (None where unknown)."""
        ...

    def create(self, folder: str, stem: str, data: bytes) -> Location:
        """Store ``data`` as a new ``stem….json`` in ``folder``, whole or not at all, never
        over another file (two writers of the same moment both keep theirs)."""
        ...

    def replace(self, location: Location, data: bytes) -> None:
        """Replace a file whole (a reader sees the old or the new, never half)."""
        ...

    def delete(self, location: Location) -> None: ...

    def read_state(self, folder: str, name: str) -> bytes | None:
        """A small state file (alert state); None if absent or unreadable."""
        ...

    def write_state(self, folder: str, name: str, data: bytes) -> None: ...

    def lock(self, folder: str, *, timeout: float) -> AbstractContextManager[None]:
        """Overlapping runs for one host take turns; ``filelock.Timeout`` if held too long."""
        ...

    def ensure_writable(self) -> None:
        """Fail now (before connecting to any host), naming the store, if it cannot take a write."""
        ...

    def clean_temps(self, folder: str) -> list[Location]:
        """Remove what killed writers left behind; what was removed."""
        ...


