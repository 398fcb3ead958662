"""Ctrl-C and SIGTERM: stop within about a second, store and send nothing half-done.

The first SIGINT (or systemd's SIGTERM) sets one process-wide flag, closes every open
transport (their in-flight commands return at once and the targets kill what they were
running), and raises :class:`Interrupted` in the main thread, which stops waiting for the
host workers. Workers check the flag before each step that leaves a trace — connecting,
storing a snapshot, notifying — so a host that is still running is abandoned, a queued
host is never started, and nothing is stored or sent after the signal. A second signal
exits at once.

A deadline (``check --deadline``, for a scheduler that kills slow health checks) is the
same close, scheduled and without the stop: commands are given no more time than is left
before "the cut" (:func:`within`), at the cut every open transport is closed so whatever
still runs returns at once and is recorded as a timeout, and what was collected is still
stored, diffed and reported in the time kept back after it. Hosts unfinished at the end
are given up (``run_all``'s ``late``).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from typing import Any, Protocol, TypeVar

T = TypeVar("T")
R = TypeVar("R")

EXIT_CODES = {signal.SIGINT: 130, signal.SIGTERM: 143}
_TICK = 0.2  # seconds: the longest the main thread waits without running Python code


class Closable(Protocol):
    def close(self) -> None: ...


class Interrupted(BaseException):
    """The user (or the service manager) asked us to stop. A BaseException, like
    KeyboardInterrupt, so that no ``except Exception`` turns it into a probe error."""

    def __init__(self, signum: int = signal.SIGINT) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return EXIT_CODES.get(signal.Signals(self.signum), 130)


_lock = threading.Lock()
_stopped = threading.Event()
_signum: int = signal.SIGINT
_open: set[Closable] = set()
_expired = threading.Event()  # the deadline's cut has passed
_cut: float | None = None  # time.monotonic() of the cut; None without a deadline
_end: float | None = None  # ... and of the end: hosts still running then are given up


def requested() -> bool:
    return _stopped.is_set()


def check() -> None:
    """Raise Interrupted if a stop was requested: call before anything that leaves a trace."""
    if _stopped.is_set():
        raise Interrupted(_signum)


def register(resource: Closable) -> None:
    """Track an open transport so a stop (or the deadline) can close it; closes it at once
    when stopping, or past the cut (its commands then return at once, as timeouts)."""
    with _lock:
        if not _stopped.is_set() and not _expired.is_set():
            _open.add(resource)
            return
    _close_quietly(resource)
    check()


def unregister(resource: Closable) -> None:
    with _lock:
        _open.discard(resource)


def stop(signum: int = signal.SIGINT) -> None:
    """Request the stop: set the flag and close every open transport."""
    global _signum
    with _lock:
        if _stopped.is_set():
            return
        _signum = signum
        _stopped.set()
    _close_all()


def expire() -> None:
    """The deadline's cut: close every open transport, as a stop does, but stop nothing else."""
    _expired.set()
    _close_all()


def expired() -> bool:
    return _expired.is_set()


def within(seconds: float, *, margin: float = 0.0) -> float:
    """``seconds``, shortened to end ``margin`` seconds before the cut (0 or less: no time
    is left); ``seconds`` itself without a deadline."""
    if _cut is None:
        return seconds
    return min(seconds, _cut - margin - time.monotonic())


def end() -> float | None:
    """time.monotonic() of the deadline's end (hosts still running then are given up);
    None without a deadline."""
    return _end


@contextmanager
def deadline(seconds: float | None, *, reserve: float = 0.0) -> Iterator[None]:
    """Bound what runs inside to ``seconds`` from now: the cut comes ``reserve`` seconds
    before the end, which is kept for storing and reporting what was collected."""
    global _cut, _end
    if seconds is None:
        yield
        return
    start = time.monotonic()
    _cut, _end = start + seconds - reserve, start + seconds
    timer = threading.Timer(max(seconds - reserve, 0.0), expire)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        _cut = _end = None
        _expired.clear()


def _close_all() -> None:
    """Close every open transport, in the background: a close may wait on a dead network,
    and the main thread must not."""
    with _lock:
        resources = list(_open)
        _open.clear()
    for resource in resources:
        threading.Thread(target=_close_quietly, args=(resource,), daemon=True).start()


def reset() -> None:
    """Forget a previous stop (tests run many commands in one process)."""
    global _signum
    with _lock:
        _stopped.clear()
        _expired.clear()
        _signum = signal.SIGINT
        _open.clear()


def _close_quietly(resource: Closable) -> None:
    try:
        resource.close()
    except Exception:  # noqa: BLE001  # stopping: a failed close leaves nothing to report
        pass


def _handle(signum: int, frame: Any) -> None:
    if _stopped.is_set():  # the second signal: the user means it
        os._exit(EXIT_CODES.get(signal.Signals(signum), 130))
    stop(signum)
    raise Interrupted(signum)


@contextmanager
def handling_signals() -> Iterator[None]:
    """Install the handlers for SIGINT and SIGTERM (main thread only), restore on exit."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    reset()
    previous = {sig: signal.signal(sig, _handle) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run_all(
    func: Callable[[T], R], items: Iterable[T], *, workers: int, name: str, done: Callable[[R], None] | None = None,
    late: Callable[[T], R] | None = None,
) -> list[R]:
    """``[func(item) for item in items]`` on at most ``workers`` threads, results in order.

    On Interrupted the queued items are cancelled and the running ones abandoned: the
    caller does not wait for them (their transports are being closed). With ``late``,
    an item still unfinished at the deadline's end gets ``late(item)`` and is abandoned too.
    """
    items = list(items)
    pool = ThreadPoolExecutor(max_workers=max(1, min(workers, len(items))), thread_name_prefix=name)
    end = None if late is None or _end is None else _end
    try:
        futures: list[Future[R]] = [pool.submit(_guarded, func, item) for item in items]
        for future in _as_completed(futures, end):
            if done is not None:
                done(future.result())
        results = [_outcome(future, item, late) for future, item in zip(futures, items, strict=True)]
    except BaseException:  # Interrupted above all: queued hosts never start
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    unfinished = not all(future.done() for future in futures)
    pool.shutdown(wait=not unfinished, cancel_futures=unfinished)
    return results


def _as_completed(futures: list[Future[R]], end: float | None) -> Iterator[Future[R]]:
    """The futures as they finish, until ``end`` (time.monotonic()) if given. The main
    thread waits in slices: a signal the kernel hands to a worker thread runs its handler
    only when the main thread next runs Python code, and an unbounded wait never would."""
    pending = set(futures)
    while pending:
        left = _TICK if end is None else min(_TICK, end - time.monotonic())
        if left <= 0:
            return  # the deadline's end: what still runs is given up
        finished, pending = wait(pending, timeout=left, return_when=FIRST_COMPLETED)
        yield from (future for future in futures if future in finished)


def _outcome(future: Future[R], item: T, late: Callable[[T], R] | None) -> R:
    return future.result() if future.done() or late is None else late(item)


def _guarded(func: Callable[[T], R], item: T) -> R:
    check()  # a queued host is never started after a stop
    return func(item)
