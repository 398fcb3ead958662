"""`fleet` from the store: every host's latest stored snapshot, reduced to its facts as it is read.

No host is contacted. Each host's files are listed (one listing of the whole store for
``--all``, else one per host, 16 at a time); its newest snapshot is read (16 reads in
flight: an object store answers in tens of milliseconds) and handed to the extractor
(fleet/gather.py) the moment it arrives, so a thousand snapshots never sit in memory
together. Parsing and extracting is CPU work (~10 ms for a big host): for many hosts it
runs in one worker process per core, which send back only digests and the contents
their receiver has not seen. A host whose latest snapshot is older than ``--max-age``
is *stale*: named, not read, not compared. An unreadable newest file is skipped (with
a warning) for the host's next one, as everywhere else.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import signal
from collections import deque
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from driftwatch import interrupt
from driftwatch.diff import DiffOptions
from driftwatch.errors import StoreError
from driftwatch.fleet.gather import Extractor, Gathered, HostExtract
from driftwatch.store import Location, LocalBackend, SnapshotStore, parse_snapshot
from driftwatch.store.local import read_file
from driftwatch.store.names import stamp_time

IN_FLIGHT = 16  # snapshots being read or extracted at once: bounds memory to ~16 snapshots
PROCESSES_FROM = 64  # hosts: below this, starting worker processes costs more than it saves


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
    store: SnapshotStore, files: dict[str, list[Location]], options: DiffOptions, *,
    max_age: timedelta | None, now: datetime,
) -> StoredFleet:
    """``files``: each host's snapshot files, oldest first (``store.paths`` / ``store.inventory``)."""
    result = StoredFleet()
    cutoff = now - max_age if max_age is not None else None
    todo = deque(_Host(h, deque(store.newest_order(paths))) for h, paths in files.items())
    # A folder's files are read by the extracting process itself: no copy of every snapshot
    # through a pipe. An object store's are fetched here, 16 at a time, to hide its latency.
    direct = isinstance(store.backend, LocalBackend)
    with ThreadPoolExecutor(IN_FLIGHT, thread_name_prefix="read") as reads, \
            _extractors(options, len(files)) as cpu, _no_gc():
        # Each future is a file being read (bytes) or extracted (HostExtract, or why it is unreadable).
        pending: dict[Future[Any], tuple[_Host, Location, bool]] = {}
        while todo or pending:
            while todo and len(pending) < IN_FLIGHT:
                host = todo.popleft()
                location = _next_fresh(host, cutoff, result)
                if location is None:
                    continue
                if direct:
                    pending[cpu.submit(extract_file, host.name, str(location), store.backend.max_bytes)] = (
                        host, location, False)
                else:
                    pending[reads.submit(store.backend.read, location)] = (host, location, True)
            done, _ = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
            interrupt.check()
            for future in done:
                host, location, was_read = pending.pop(future)
                try:
                    outcome = future.result()
                except StoreError as exc:
                    outcome = str(exc)
                if was_read and not isinstance(outcome, str):
                    pending[cpu.submit(extract_bytes, host.name, str(location), outcome)] = (host, location, False)
                elif not _take(store, host, location, outcome, cutoff, result):
                    todo.append(host)  # unreadable: its next file is due
    order = {name: i for i, name in enumerate(files)}
    result.gathered.hosts.sort(key=lambda h: order[h.name])
    return result


def _next_fresh(host: _Host, cutoff: datetime | None, result: StoredFleet) -> Location | None:
    """The host's next file to read, or None with the host recorded as stale or left out."""
    if not host.files:
        result.left_out.append((host.name, "no readable snapshot"))
        return None
    taken = stamp_time(str(host.files[0]).rsplit("/", 1)[-1])
    if cutoff is not None and taken is not None and taken < cutoff:
        result.stale.append((host.name, taken))  # older files are older still: none is read
        return None
    return host.files.popleft()


def _take(
    store: SnapshotStore, host: _Host, location: Location, extracted: HostExtract | str, cutoff: datetime | None,
    result: StoredFleet,
) -> bool:
    """Keep what was extracted; False when the file was unreadable (the host's next file is due)."""
    if isinstance(extracted, str):
        store.skipped(location, extracted)
        return False
    result.gathered.learn(extracted)  # what it carries may be another host's content too
    if cutoff is not None and extracted.taken_at < cutoff:  # a file whose name carries no time
        result.stale.append((host.name, extracted.taken_at))
    else:
        result.gathered.add(extracted)
    return True


# -- extraction, in this process or in workers ------------------------------------------

_extractor: Extractor | None = None  # one per process: it remembers which contents it sent


def _start(options: DiffOptions) -> None:
    global _extractor
    _extractor = Extractor(options)


def _start_worker(options: DiffOptions) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle: it stops the pool
    gc.disable()  # see _no_gc: a worker only ever builds acyclic JSON trees
    _start(options)


def extract_file(host: str, location: str, max_bytes: int) -> HostExtract | str:
    """A local snapshot file's facts, or why it cannot be read."""
    try:
        return extract_bytes(host, location, read_file(location, max_bytes))
    except StoreError as exc:
        return str(exc)


def extract_bytes(host: str, location: str, data: bytes) -> HostExtract | str:
    """A snapshot file's facts, or why it cannot be read."""
    assert _extractor is not None
    try:
        return _extractor.extract(host, parse_snapshot(data, location))
    except StoreError as exc:
        return str(exc)


class _InProcess(Executor):
    """Extraction in this process (few hosts, or one core): the same interface, done at once."""

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        future.set_result(fn(*args, **kwargs))
        return future


@contextmanager
def _no_gc() -> Iterator[None]:
    """Parsed snapshots are trees (no cycles): reference counting frees them. The cyclic
    collector, run every few thousand allocations, would traverse everything alive each
    time: 40% of the extraction's time on a big host."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


@contextmanager
def _extractors(options: DiffOptions, hosts: int) -> Iterator[Executor]:
    workers = min(os.cpu_count() or 1, 4)
    if hosts < PROCESSES_FROM or workers < 2:
        _start(options)
        yield _InProcess()
        return
    # spawn, not fork: the parent has threads (reads, the object store's event loop).
    pool = ProcessPoolExecutor(
        workers, mp_context=multiprocessing.get_context("spawn"), initializer=_start_worker, initargs=(options,)
    )
    try:
        yield pool
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
