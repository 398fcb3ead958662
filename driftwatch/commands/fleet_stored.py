"""`fleet` from the store: every host's latest stored snapshot, reduced to its facts as it is read.

No host is contacted. Each host's files are listed (one listing of the whole store for
``--all``, else one per host, 16 at a time), its newest snapshot is read (16 reads in
flight: an object store answers in tens of milliseconds) and handed to the extractor
(fleet/gather.py) the moment it arrives, so a thousand snapshots never sit in memory
together. A host whose latest snapshot is older than ``--max-age`` is *stale*: named,
not read, not compared. An unreadable newest file is skipped (with a warning) for the
host's next one, as everywhere else.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from driftwatch import interrupt
from driftwatch.errors import StoreError
from driftwatch.fleet.gather import Gathered, HostExtract
from driftwatch.model import Snapshot
from driftwatch.store import Location, SnapshotStore, parse_snapshot
from driftwatch.store.names import stamp_time

READS_IN_FLIGHT = 16


@dataclass
class StoredFleet:
    gathered: Gathered = field(default_factory=Gathered)
    stale: list[tuple[str, datetime]] = field(default_factory=list)  # host, when its latest snapshot was taken
    left_out: list[tuple[str, str]] = field(default_factory=list)  # host, why


@dataclass
class _Host:
    name: str
    files: deque[Location]  # newest first, not yet tried


def gather_stored(
    store: SnapshotStore, files: dict[str, list[Location]], extract: Callable[[str, Snapshot], HostExtract], *,
    max_age: timedelta | None, now: datetime,
) -> StoredFleet:
    """``files``: each host's snapshot files, oldest first (``store.paths`` / ``store.inventory``)."""
    result = StoredFleet()
    cutoff = now - max_age if max_age is not None else None
    todo = deque(_Host(h, deque(reversed(paths))) for h, paths in files.items())
    with ThreadPoolExecutor(max_workers=READS_IN_FLIGHT, thread_name_prefix="read") as pool:
        reading: dict[Future[bytes], tuple[_Host, Location]] = {}
        try:
            while todo or reading:
                while todo and len(reading) < READS_IN_FLIGHT:
                    host = todo.popleft()
                    location = _next_fresh(host, cutoff, result)
                    if location is not None:
                        reading[pool.submit(store.backend.read, location)] = (host, location)
                done, _ = wait(reading, timeout=0.5, return_when=FIRST_COMPLETED)
                interrupt.check()
                for future in done:
                    host, location = reading.pop(future)
                    if not _take(store, host, location, future, extract, cutoff, result):
                        todo.append(host)  # unreadable: try its next file
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            raise
    order = {name: i for i, name in enumerate(files)}
    result.gathered.hosts.sort(key=lambda h: order[h.name])
    return result


def _next_fresh(host: _Host, cutoff: datetime | None, result: StoredFleet) -> Location | None:
    """The host's next file to read, or None with the host recorded as stale or left out."""
    if not host.files:
        result.left_out.append((host.name, "no readable snapshot"))
        return None
    location = host.files[0]
    taken = stamp_time(str(location).rsplit("/", 1)[-1])
    if cutoff is not None and taken is not None and taken < cutoff:
        result.stale.append((host.name, taken))  # older files are older still: none is read
        return None
    return host.files.popleft()


def _take(
    store: SnapshotStore, host: _Host, location: Location, future: Future[bytes],
    extract: Callable[[str, Snapshot], HostExtract], cutoff: datetime | None, result: StoredFleet,
) -> bool:
    """Extract what was read; False when it was unreadable (the host's next file is due)."""
    try:
        snapshot = parse_snapshot(future.result(), location)
    except StoreError as exc:
        store.skipped(location, str(exc))
        return False
    if cutoff is not None and snapshot.taken_at < cutoff:  # a file whose name carries no time
        result.stale.append((host.name, snapshot.taken_at))
        return True
    result.gathered.add(extract(host.name, snapshot))
    return True
