"""`driftwatch accept`: accept a host's known drift, list acceptances, revoke them.

Accepting reads the host's latest stored snapshot and its baseline, diffs them (the
config's ignore rules applied: an ignored change needs no accepting) and records the
drifting changes chosen, with who, when, why and until when, in the host's acceptances
(``triage/book.py``), under the host's store lock so a running ``check`` and an accept
take turns. Mistakes that name nothing are warnings, not errors.
"""

from __future__ import annotations

import getpass
import os
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from filelock import Timeout as LockTimeout
from rich.text import Text

from driftwatch.commands.common import (
    host_message, ignoring, load, print_json, stderr_console, stdout_console, store_warnings, warn,
)
from driftwatch.config import Config, Target, host_watch, resolve_targets
from driftwatch.diff import DiffOptions
from driftwatch.explain import diff_snapshots
from driftwatch.facts.fmt import plural
from driftwatch.errors import DriftwatchError, UserError
from driftwatch.model import utcnow
from driftwatch.report.safe import clean
from driftwatch.store import SnapshotStore, validate_label
from driftwatch.triage.accept import Acceptance, merge, revoke, select
from driftwatch.triage.apply import triage
from driftwatch.triage.book import Book, read_book, write_book
from driftwatch.when import parse_when, shown

EXIT_OK, EXIT_ERROR = 0, 1


@dataclass
class AcceptRequest:
    items: list[str]
    baseline: str = "good"
    reason: str = ""
    until: datetime | None = None
    json_out: bool = False


@dataclass
class HostResult:
    host: str
    verb: str  # accepted / revoked
    entries: list[Acceptance] = field(default_factory=list)
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"host": self.host, self.verb: [a.to_json() for a in self.entries], "error": self.error}


def who() -> str:
    """``user@machine`` of the person accepting."""
    try:
        user = getpass.getuser()
    except (OSError, KeyError):  # no USER and no passwd entry (a bare container)
        user = f"uid{os.getuid()}"
    return f"{user}@{socket.gethostname()}"


def parse_until(text: str | None, now: datetime) -> datetime | None:
    if text is None:
        return None
    until = parse_when(text, now=now, end_of_day=True, relative_sign=1)
    if until <= now:
        raise UserError(f"--until {text}: {shown(until)} has already passed")
    return until


def run_accept(
    word: str, request: AcceptRequest, *, config_path: str | None, store_path: str | None
) -> int:
    if not request.reason.strip():
        raise UserError("say why with --reason TEXT: it is shown with every accepted change")
    validate_label(request.baseline)
    config, store = load(config_path, store_path)
    with store_warnings(store):
        results = [_each(store, t, config, lambda t: _accept(t, config, store, request)) for t in _hosts(config, word)]
    _print(results, request, "accepted")
    return EXIT_ERROR if any(r.error for r in results) else EXIT_OK


def run_revoke(word: str, request: AcceptRequest, *, config_path: str | None, store_path: str | None) -> int:
    config, store = load(config_path, store_path)
    with store_warnings(store):
        results = [_each(store, t, config, lambda t: _revoke(t.name, store, request)) for t in _hosts(config, word)]
    _print(results, request, "revoked")
    return EXIT_ERROR if any(r.error for r in results) else EXIT_OK


def _hosts(config: Config, word: str) -> list[Target]:
    return resolve_targets(config, [word])  # a config group accepts on every host in it


def _each(store: SnapshotStore, target: Target, config: Config, work: Callable[[Target], HostResult]) -> HostResult:
    """One host under its lock: an error is this host's, never the others'."""
    try:
        with _locked(store, target.name, config):
            return work(target)
    except DriftwatchError as exc:
        return HostResult(target.name, "", error=str(exc))


@contextmanager
def _locked(store: SnapshotStore, host: str, config: Config) -> Iterator[None]:
    if not store.paths(host):
        known = ", ".join(store.hosts()) or "none"
        raise UserError(f"no snapshots of {host!r} in {store.root} (hosts with snapshots: {known})")
    wait = 2 * (config.timeout + config.connect_timeout) + 60  # as long as a check may hold it
    try:
        with store.lock(host, timeout=wait):
            yield
    except LockTimeout:
        raise UserError(f"{host}: another driftwatch command held the host's lock for over {wait:g}s") from None


def _accept(target: Target, config: Config, store: SnapshotStore, request: AcceptRequest) -> HostResult:
    host, label = target.name, request.baseline
    baseline = store.find_label(host, label)
    if baseline is None:
        raise UserError(f"{host}: no readable snapshot labelled {label!r}: nothing to accept drift from")
    latest = store.latest(host)
    assert latest is not None  # the baseline itself is readable
    options = DiffOptions(free_memory_threshold_mib=config.free_memory_threshold_mib, focus=list(target.watch.focus))
    result = triage(diff_snapshots(baseline.snapshot, latest.snapshot, options=options), host=host, ignoring=ignoring(config))
    chosen, unmatched = select(result.changes, request.items)
    drifting = [f"{c.category}:{c.shown_item}" for c in result.drift_changes]
    for pattern in unmatched:
        listing = f" (drifting: {', '.join(drifting[:6])}{', …' if len(drifting) > 6 else ''})" if drifting else ""
        warn(f"{host}: {pattern!r} names no drifting change{listing}")
    if not drifting:
        warn(f"{host}: nothing to accept: its latest snapshot ({shown(latest.snapshot.taken_at)}) has no drift from its {label!r} baseline")
    if not chosen:
        return HostResult(host, "accepted")
    book = _writable_book(store, host)
    now = utcnow()
    entries = [Acceptance.of(c, reason=request.reason.strip(), by=who(), at=now, until=request.until,
                             since=latest.snapshot.taken_at) for c in chosen]
    book.baselines[label], replaced = merge(book.for_baseline(label), entries)
    write_book(store, book)
    for old, new in replaced:  # never silently: an --until 7d one replaced by one that never expires
        warn(f"{host}: {old.category}:{old.shown_item}: replaces the acceptance {old.describe()} "
             f"({old.until_text()}) with this one ({new.until_text()})")
    return HostResult(host, "accepted", entries)


def _revoke(host: str, store: SnapshotStore, request: AcceptRequest) -> HostResult:
    book = _writable_book(store, host)
    kept, revoked, unmatched = revoke(book.for_baseline(request.baseline), request.items)
    for pattern in unmatched:
        warn(f"{host}: {pattern!r} names no acceptance against its {request.baseline!r} baseline")
    if not revoked:
        if not request.items:
            warn(f"{host}: no acceptances against its {request.baseline!r} baseline to revoke")
        return HostResult(host, "revoked")
    book.baselines[request.baseline] = kept
    write_book(store, book)
    return HostResult(host, "revoked", revoked)


def _writable_book(store: SnapshotStore, host: str) -> Book:
    book = read_book(store, host)
    if book.damaged:  # writing over it would lose what a person may still recover
        raise UserError(f"{book.problems[0]}; fix or delete it, then run this again")
    return book


def _print(results: list[HostResult], request: AcceptRequest, verb: str) -> None:
    err = stderr_console()
    for result in results:
        if result.error:  # one line each on stderr; the other hosts' results still print
            err.print(Text(clean(host_message(result.host, result.error)), style="red"))
    if request.json_out:
        print_json([r.to_json() for r in results])
        return
    console = stdout_console()
    for result in results:
        if result.error or not result.entries:
            continue
        until = f", until {shown(request.until)}" if verb == "accepted" and request.until else ""
        why = f" ({request.reason.strip()}{until})" if verb == "accepted" else ""
        head = f"{result.host}: {verb} {plural(len(result.entries), 'change')} against its {request.baseline!r} baseline{why}"
        console.print(Text(clean(head), style="bold"))
        for entry in result.entries:
            line = Text("  ")
            line.append(f"{entry.category:<11} ", style="bold")
            line.append(clean(entry.explanation or f"{entry.shown_item}: {entry.describe()}"))
            console.print(line)


def run_list(word: str | None, *, json_out: bool, config_path: str | None, store_path: str | None) -> int:
    config, store = load(config_path, store_path)
    hosts = [t.name for t in _hosts(config, word)] if word else store.hosts()
    now = utcnow()
    books = [read_book(store, host) for host in hosts]
    for book in books:
        for problem in book.problems:
            warn(problem)
    rows = [(b.host, label, a) for b in books for label, entries in sorted(b.baselines.items()) for a in entries]
    with store_warnings(store):
        state = {(h, label): _drift_now(store, config, h, label) for h, label in {(h, label) for h, label, _ in rows}}
    judged = [(h, label, a, _standing(a, state[(h, label)], now)) for h, label, a in rows]
    if json_out:
        print_json([{"host": h, "baseline": label, "expired": a.expired(now), "in_effect": standing is None,
                     "not_in_effect": standing, **a.to_json()} for h, label, a, standing in judged])
        return EXIT_OK
    console = stdout_console()
    if not rows:
        console.print(Text(f"no acceptances{' for ' + clean(word) if word else ''} in {store.root}"))
    for host, label, entry, standing in judged:
        line = Text(clean(f"{host} @{label}  "), style="bold")
        line.append(f"{entry.category:<11} ", style="bold")
        line.append(clean(entry.explanation or entry.shown_item))
        console.print(line)
        until = f"; until {shown(entry.until)}" if entry.until else ""
        note = f" (not in effect: {standing})" if standing else ""
        console.print(Text("    " + clean(entry.describe() + until) + note, style="yellow" if note else "dim"))
    return EXIT_OK


def _drift_now(store: SnapshotStore, config: Config, host: str, label: str) -> list[Any] | None:
    """The host's drift from its ``label`` baseline as of its latest snapshot (None: unknown)."""
    baseline, latest = store.find_label(host, label), store.latest(host)
    if baseline is None or latest is None:
        return None
    options = DiffOptions(free_memory_threshold_mib=config.free_memory_threshold_mib,
                          focus=list(host_watch(config, host).focus))
    result = diff_snapshots(baseline.snapshot, latest.snapshot, options=options)
    return [c for c in result.changes if c.drift]


def _standing(entry: Acceptance, drift: list[Any] | None, now: datetime) -> str | None:
    """Why an acceptance does nothing now, or None when it is in effect."""
    if entry.expired(now):
        return "expired, counts as drift again"
    if drift is None:
        return "no baseline or latest snapshot to apply it to"
    if any(entry.matches(c) for c in drift):
        return None
    again = [c for c in drift if (c.category, str(c.item)) == (entry.category, entry.item)]
    if again:
        return f"the latest snapshot changed it again, to {again[0].new!r}"
    return "the latest snapshot no longer has this change"
