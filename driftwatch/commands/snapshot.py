"""`driftwatch snapshot`: collect and store one snapshot per target, hosts in parallel."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from driftwatch import interrupt
from driftwatch.commands.common import host_message, load, print_json, stderr_console, stdout_console, store_warnings
from driftwatch.config import Config, Target, canary_wanted, resolve_targets
from driftwatch.connect import open_transport
from driftwatch.errors import DriftwatchError, StoreError
from driftwatch.model import ProbeStatus, Snapshot
from driftwatch.store import Location, SnapshotStore, StoredSnapshot, validate_label

if TYPE_CHECKING:
    from rich.console import Console

# The probes, the collector and the report (rich) are imported only once the transport is
# open: on SSH the target's command agent starts in the background meanwhile (the user's
# shell and a python3 on the target: 60 ms or more), so those ~40 ms of imports cost nothing.

EXIT_OK, EXIT_ERROR, EXIT_PARTIAL = 0, 1, 3


@dataclass(frozen=True)
class CanaryAsk:
    """The command line's word on the canary: --canary (``asked``), --url, or `driftwatch
    canary` (``only``: the canary and the probes it stands on)."""

    asked: bool = False
    url: str | None = None
    only: bool = False


@dataclass
class HostOutcome:
    """What happened to one host: a stored snapshot, or the reason there is none."""

    target: Target
    snapshot: Snapshot | None = None
    path: Location | None = None
    error: str | None = None
    previous: StoredSnapshot | None = None  # the host's latest snapshot before this one

    @property
    def exit_code(self) -> int:
        if self.snapshot is None or self.error is not None:  # not collected, or collected but not stored
            return EXIT_ERROR
        return EXIT_OK if self.snapshot.complete else EXIT_PARTIAL


def take_snapshot(
    target: Target,
    config: Config,
    store: SnapshotStore,
    *,
    timeout: float,
    labels: list[str],
    accept_new_host_key: bool = False,
    canary: CanaryAsk | None = None,
) -> HostOutcome:
    """Connect and collect; nothing is stored yet (the caller decides how)."""
    try:
        transport = open_transport(target, config, accept_new_host_key=accept_new_host_key)
    except DriftwatchError as exc:
        # A bad port, an unsupported ProxyCommand, an unknown host: this target's outcome,
        # never an abort of the others' reports (their alerts may already be out).
        return HostOutcome(target, error=str(exc))
    from driftwatch.collect import collect_snapshot
    from driftwatch.probes.registry import OPT_IN, probes_for
    if not target.is_local:  # the agent is still starting: load rich for the report meanwhile
        from driftwatch.report import snapshots  # noqa: F401

    try:
        interrupt.register(transport)
        try:
            previous = store.latest(target.name)
        except StoreError:
            previous = None  # an unreadable old snapshot only costs the hash cache
        ask = canary or CanaryAsk()
        probes = probes_for(target.watch, canary_wanted(config, target.watch, ask.asked), config.canary, ask.url, ask.only)
        earlier = earlier_facts(store, target.name, [n for n in probes if n in OPT_IN], previous)
        snap = collect_snapshot(
            target, transport, probes, timeout=timeout, previous=previous.snapshot if previous else None,
            labels=labels, earlier=earlier,
        )
    finally:
        interrupt.unregister(transport)
        transport.close()
    interrupt.check()  # probes cut short by the stop are not a host's failure
    failed = {n: r.error for n, r in snap.probes.items() if r.status in (ProbeStatus.error, ProbeStatus.timeout)}
    if failed and not transport.reached:  # every command failed to start: the host was never read
        first = next((str(e) for e in failed.values() if e), "no command started")  # the same in every probe
        return HostOutcome(target, error=f"nothing collected: {first.removeprefix('no result from the target: ')}")
    if len(failed) == len(snap.probes):
        reasons = "; ".join(f"{n}: {r}" for n, r in failed.items())
        return HostOutcome(target, error=f"nothing collected ({reasons})")
    return HostOutcome(target, snapshot=snap, previous=previous)


EARLIER_LOOKBACK = 20  # stored snapshots searched for an opt-in probe's last facts


def earlier_facts(
    store: SnapshotStore, host: str, names: list[str], previous: StoredSnapshot | None
) -> dict[str, dict[str, object]]:
    """For opt-in probes the previous snapshot lacks (a cron check without --perf since the
    last --perf), their facts from the newest of the last few snapshots that has them ok:
    the perf probe's history goes on from there."""
    wanted = [n for n in names if previous is None or not _ok(previous.snapshot, n)]
    found: dict[str, dict[str, object]] = {}
    if not wanted or previous is None:
        return found
    try:
        for position, stored in enumerate(store.newest_first(host)):
            if position >= EARLIER_LOOKBACK or len(found) == len(wanted):
                break
            for name in wanted:
                if name not in found and _ok(stored.snapshot, name):
                    found[name] = stored.snapshot.probes[name].facts
    except StoreError:
        pass  # an unreadable store costs the history, not the snapshot
    return found


def _ok(snapshot: Snapshot, name: str) -> bool:
    record = snapshot.probes.get(name)
    return record is not None and record.status is ProbeStatus.ok


def snapshot_host(
    target: Target,
    config: Config,
    store: SnapshotStore,
    *,
    timeout: float,
    labels: list[str],
    accept_new_host_key: bool = False,
    canary: CanaryAsk | None = None,
) -> HostOutcome:
    outcome = take_snapshot(
        target, config, store, timeout=timeout, labels=labels, accept_new_host_key=accept_new_host_key, canary=canary
    )
    if outcome.snapshot is not None:
        interrupt.check()  # a snapshot cut short by Ctrl-C is never stored
        try:
            outcome.path = store.save(outcome.snapshot)
        except StoreError as exc:  # disk full, store made read-only meanwhile: this host's outcome
            outcome.error = f"snapshot taken but not stored: {exc}"
    return outcome


def collect_many(
    targets: list[Target], config: Config, store: SnapshotStore, *, timeout: float, labels: list[str],
    parallel: int, accept_new_host_key: bool = False, canary: CanaryAsk | None = None,
) -> list[HostOutcome]:
    """Every host's outcome is data: one slow or unreachable host never fails the others.

    At most ``parallel`` hosts are in flight, so a thousand hosts never mean a thousand
    connections or threads at once.
    """
    def one(target: Target) -> HostOutcome:
        return snapshot_host(
            target, config, store, timeout=timeout, labels=labels, accept_new_host_key=accept_new_host_key,
            canary=canary,
        )

    with _progress(len(targets)) as done:
        return interrupt.run_all(one, targets, workers=parallel, name="host", done=done)


@contextmanager
def _progress(total: int) -> Iterator[Callable[[HostOutcome], None]]:
    """A progress bar on stderr for several hosts, only when a person is watching."""
    if total < 2 or not sys.stderr.isatty():
        yield lambda outcome: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn  # only when shown

    from driftwatch.report.safe import clean

    with Progress(
        TextColumn("snapshot"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.description}"),
        console=stderr_console(), transient=True,
    ) as progress:
        task = progress.add_task("", total=total)
        yield lambda outcome: progress.update(task, advance=1, description=clean(outcome.target.name))


def run_snapshot(
    words: list[str], *, labels: list[str], json_out: bool, timeout: float | None, parallel: int,
    accept_new_host_key: bool, config_path: str | None, store_path: str | None, canary: CanaryAsk | None = None,
    report: Callable[[Console, list[HostOutcome]], None] | None = None,
    partial: Callable[[HostOutcome], bool] | None = None, perf: bool = False,
) -> int:
    """``report`` prints more after the stored lines; ``partial`` says which complete
    snapshots still exit 3 (the canary's: a server it could not ask)."""
    for label in labels:
        validate_label(label)
    config, store = load(config_path, store_path)
    targets = resolve_targets(config, words)
    if perf:
        targets = [target.with_perf() for target in targets]
    store.ensure_writable()  # before connecting to any host
    with store_warnings(store):
        outcomes = collect_many(
            targets, config, store, timeout=timeout or config.timeout, labels=labels,
            parallel=parallel, accept_new_host_key=accept_new_host_key, canary=canary,
        )
    failed = [o for o in outcomes if o.error]
    if failed:
        from rich.text import Text

        from driftwatch.report.safe import clean

        err = stderr_console()
        for outcome in failed:
            err.print(Text(clean(host_message(outcome.target.name, outcome.error or "")), style="red"))
    codes = [EXIT_PARTIAL if partial and o.exit_code == EXIT_OK and partial(o) else o.exit_code for o in outcomes]
    if json_out:  # rich is not needed (nor imported: ~20 ms) for JSON
        print_json([_json_entry(o, c) for o, c in zip(outcomes, codes, strict=True)])
    else:
        from driftwatch.report.snapshots import print_stored

        out = stdout_console()
        for outcome in outcomes:
            if outcome.snapshot is not None and outcome.path is not None:
                print_stored(out, outcome.snapshot, outcome.path)
        if report is not None:
            report(out, outcomes)
    return worst(codes)


def worst(codes: Iterable[int]) -> int:
    """1 (error) beats 3 (partial) beats 0."""
    found = set(codes)
    for code in (EXIT_ERROR, EXIT_PARTIAL):
        if code in found:
            return code
    return EXIT_OK


def _json_entry(outcome: HostOutcome, code: int) -> dict[str, object]:
    entry: dict[str, object] = {"host": outcome.target.name, "exit_code": code}
    if outcome.error is not None:
        entry["error"] = outcome.error
    if outcome.snapshot is not None:
        entry["path"] = str(outcome.path) if outcome.path else None
        entry["snapshot"] = outcome.snapshot.model_dump(mode="json")
    return entry
