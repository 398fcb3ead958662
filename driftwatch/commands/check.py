"""`driftwatch check`: snapshot now, diff against the baseline, alert once per new drift."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from filelock import Timeout as LockTimeout
from rich.text import Text

from driftwatch import interrupt
from driftwatch.cron.alerts import AlertKind, AlertState, fingerprint
from driftwatch.commands.common import host_message, ignoring, load, print_json, stderr_console, warn_unused_rules
from driftwatch.commands.diff import output_format, print_report
from driftwatch.commands.snapshot import CanaryAsk, HostOutcome, take_snapshot
from driftwatch.config import Config, Target, resolve_targets
from driftwatch.diff import Change, DiffOptions, Severity
from driftwatch.explain import DiffResult, diff_snapshots
from driftwatch.explain.known_bad import sentence
from driftwatch.explain.symptoms import lead
from driftwatch.errors import StoreError, UserError
from driftwatch.model import Snapshot
from driftwatch.cron.notify import send, validate_destination
from driftwatch.report.diff import HEADLINE_MAX, headline
from driftwatch.report.nhc import nhc_line
from driftwatch.report.safe import clean
from driftwatch.cron.retention import save_deduplicated
from driftwatch.rules.finding import Diagnosis, Finding
from driftwatch.rules.host import RuleOptions
from driftwatch.rules.registry import diagnose
from driftwatch.store import SnapshotStore, validate_label
from driftwatch.cron.textfile import StoreHealth, check_textfile_folder, write_textfile
from driftwatch.triage.apply import RuleUse, triage
from driftwatch.triage.book import read_book
from driftwatch.triage.ignore import Ignoring

EXIT_OK, EXIT_ERROR, EXIT_DRIFT = 0, 1, 2
# Kept back from --deadline after the cut, for storing, diffing, alerting and reporting
# what was collected: a quarter of it, at most this.
FINISH_S = 5.0
# Notifications end this long before the deadline's end, so the host's result is still
# taken then: a webhook that never answers costs its alert, never the result.
NOTIFY_MARGIN_S = 0.5


@dataclass
class CheckRequest:
    baseline: str
    timeout: float
    notify: list[str] = field(default_factory=list)
    textfile: Path | None = None
    accept_new_host_key: bool = False
    quiet: bool = False  # cron: print only an alert (a new or different drift, or resolved)
    show_ignored: bool = False  # --all: list the changes [[ignore]] rules hide
    ignoring: Ignoring | None = None  # the config's rules, judged at the start of the run
    rule_use: RuleUse = field(default_factory=RuleUse)  # which rules named something, over all hosts
    fail_on: Severity = Severity.info  # --fail-on: drift below this severity exits 0
    deadline: float | None = None  # --deadline: seconds for the whole command
    nhc: bool = False  # --nhc: one line for a scheduler's health check, nothing else on stdout
    perf: bool = False  # --perf: measure the host too (the opt-in perf probe)
    canary: CanaryAsk = field(default_factory=CanaryAsk)  # --canary


@dataclass
class CheckOutcome:
    host: str
    result: DiffResult | None = None
    error: str | None = None
    alert: AlertKind | None = None
    warnings: list[str] = field(default_factory=list)
    store_write_ok: bool = True  # False when a write to the snapshot store failed (full, read-only...)
    known_bad: Diagnosis | None = None  # what doctor says of the host now (driftwatch_doctor_findings)
    fail_on: Severity = Severity.info

    @property
    def failing(self) -> list[Change]:
        """The drift at or above --fail-on, most likely cause first: what exits 2."""
        if self.result is None:
            return []
        return [change for change in self.result.drift_changes if change.severity.rank >= self.fail_on.rank]

    @property
    def failing_states(self) -> list[Finding]:
        """New known-bad states at or above --fail-on: they exit 2 too, with or without a drift line."""
        if self.result is None:
            return []
        return [finding for finding in self.result.problems if finding.severity.rank >= self.fail_on.rank]

    def causes(self) -> list[str]:
        """Why the check fails, most likely first: the failing drift, else the known-bad states.
        A symptom that no failing change can explain (a probe that now hangs) comes first,
        in its own words: never an unrelated change named as why."""
        failing = self.failing
        symptom, cause = lead(failing)
        if symptom is not None and cause is None:
            return [symptom.headline or symptom.cause, *(c.cause for c in failing if c is not symptom)]
        return [change.cause for change in failing] or [sentence(f) for f in self.failing_states]

    @property
    def exit_code(self) -> int:
        if self.error is not None:
            return EXIT_ERROR
        return EXIT_DRIFT if self.failing or self.failing_states else EXIT_OK


def check_host(target: Target, config: Config, store: SnapshotStore, request: CheckRequest) -> CheckOutcome:
    """One host, under its lock: overlapping cron runs take turns, and alert at most once."""
    wait = max(interrupt.within(2 * (request.timeout + config.connect_timeout) + 60), 0.0)
    try:
        with store.lock(target.name, timeout=wait):
            outcome = _check_locked(target, config, store, request)
    except LockTimeout:
        outcome = CheckOutcome(target.name, error=f"another check of this host held its lock for over {round(wait, 1):g}s")
    except StoreError as exc:  # the lock could not even be created: the store failed under us
        outcome = CheckOutcome(target.name, error=str(exc), store_write_ok=False)
        _textfile(request, outcome, None, store)
    outcome.fail_on = request.fail_on
    return outcome


def _late(request: CheckRequest, store: SnapshotStore) -> Callable[[Target], CheckOutcome]:
    """The outcome of a host still being checked at the end of --deadline: given up."""
    def late(target: Target) -> CheckOutcome:
        outcome = CheckOutcome(target.name, error=f"not checked within the --deadline of {request.deadline:g}s")
        _textfile(request, outcome, None, store)
        return outcome

    return late


@dataclass(frozen=True)
class PendingAlert:
    """An alert decided under the host's lock, sent once the result is written."""

    state: AlertState
    kind: AlertKind
    current: str | None  # the fingerprint to remember once it is delivered


def _check_locked(target: Target, config: Config, store: SnapshotStore, request: CheckRequest) -> CheckOutcome:
    taken = take_snapshot(
        target, config, store, timeout=request.timeout, labels=[], accept_new_host_key=request.accept_new_host_key,
        canary=request.canary,
    )
    outcome, alert = _evaluate(target, config, store, request, taken)
    if taken.snapshot is not None:
        after = outcome.result.after if outcome.result is not None else None
        outcome.known_bad = after or diagnose(taken.snapshot, RuleOptions.of(target.watch.focus, config.rules))
    outcome.warnings[:0] = store.unreadable(target.name) + store.ahead(target.name)  # each skipped file, named
    _textfile(request, outcome, taken.snapshot, store)  # the result first: notifications get what is left
    if alert is not None:
        written_ok = outcome.store_write_ok
        _deliver(outcome, alert, request)
        if outcome.store_write_ok != written_ok:  # the alert state could not be stored
            _textfile(request, outcome, taken.snapshot, store)
    return outcome


def _evaluate(
    target: Target, config: Config, store: SnapshotStore, request: CheckRequest, taken: HostOutcome
) -> tuple[CheckOutcome, PendingAlert | None]:
    """Store the snapshot, diff it against the baseline and decide the alert: a store that
    fails never hides a drift."""
    if taken.snapshot is None:
        return CheckOutcome(target.name, error=taken.error), None
    interrupt.check()  # stopped: nothing stored, nothing sent
    not_stored = None
    try:
        save_deduplicated(store, taken.snapshot, taken.previous)
    except StoreError as exc:  # full or read-only: still diff, alert and report, then exit 1
        not_stored = f"snapshot taken but not stored: {exc}"
    baseline = store.find_label(target.name, request.baseline)  # unreadable files are skipped
    if baseline is None:
        skipped = len(store.unreadable(target.name))
        if skipped:
            error = f"no readable snapshot labelled {request.baseline!r} ({skipped} unreadable file(s) skipped)"
        else:
            error = (
                f"no snapshot labelled {request.baseline!r} yet; if the host is good now, make this one the "
                f"baseline: driftwatch label {target.name}@latest {request.baseline}"
            )
        return CheckOutcome(
            target.name, error=error, warnings=[not_stored] if not_stored else [], store_write_ok=not not_stored
        ), None
    options = DiffOptions(
        free_memory_threshold_mib=config.free_memory_threshold_mib, focus=list(target.watch.focus),
        version_rules=tuple(config.rules),
    )
    result = diff_snapshots(baseline.snapshot, taken.snapshot, options=options)
    book = read_book(store, target.name)  # damaged: warned, and the drift stays drift
    result = triage(
        result, host=target.name, ignoring=request.ignoring or ignoring(config),
        acceptances=book.for_baseline(request.baseline), use=request.rule_use,
    )
    outcome = CheckOutcome(
        target.name, result=result, error=not_stored, warnings=list(book.problems), store_write_ok=not not_stored
    )
    state = AlertState.for_host(store, outcome.host, request.baseline)
    current = fingerprint(result.drift_changes, result.problems)
    kind = state.decide(current)
    return outcome, None if kind is None else PendingAlert(state, kind, current)


def _deliver(outcome: CheckOutcome, alert: PendingAlert, request: CheckRequest) -> None:
    """Send the alert within what is left of --deadline; a failure is a warning beside the result."""
    assert outcome.result is not None
    if request.notify:
        interrupt.check()
        payload = alert_payload(outcome.host, request.baseline, alert.kind, outcome.result)
        end = interrupt.end()
        until = None if end is None else end - NOTIFY_MARGIN_S
        failures = [w for w in (send(dest, payload, until=until) for dest in request.notify) if w]
        outcome.warnings += failures
        if len(failures) == len(request.notify):
            return  # delivered nowhere: alert again next run
    elif not request.quiet:
        return  # a person at a terminal: the report is printed, no alert is used up
    # Delivered somewhere, or printed by --quiet for cron to mail: do not repeat it.
    outcome.alert = alert.kind
    try:
        alert.state.remember(alert.current)
    except StoreError as exc:  # full or read-only: the alert went out, it may go out again
        outcome.store_write_ok = False
        problem = f"{exc}: the same alert may be sent again"
        if outcome.error is None:
            outcome.error = problem
        else:
            outcome.warnings.append(problem)


def alert_payload(host: str, baseline: str, kind: AlertKind, result: DiffResult) -> dict[str, Any]:
    if kind is AlertKind.resolved:
        decided = [f"{result.summary[k]} {k}" for k in ("accepted", "ignored") if result.summary.get(k)]
        text = f"driftwatch: {host} is back on its {baseline!r} baseline (resolved{'; ' if decided else ''}{', '.join(decided)})"
    else:
        lead = f"driftwatch: {host} drifted from its {baseline!r} baseline: "
        text = lead + headline(result, limit=max(HEADLINE_MAX - len(lead), 80))
    return {"text": text, "host": host, "baseline": baseline, "status": kind.value, **result.to_json()}


def _textfile(request: CheckRequest, outcome: CheckOutcome, snapshot: Snapshot | None, store: SnapshotStore) -> None:
    if request.textfile is None:
        return
    health = StoreHealth(unreadable=len(store.unreadable(outcome.host)), write_ok=outcome.store_write_ok)
    try:
        write_textfile(
            request.textfile, outcome.host, snapshot=snapshot, result=outcome.result, store=health,
            known_bad=outcome.known_bad,
        )
    except OSError as exc:  # its own folder, but maybe on the same full disk
        outcome.warnings.append(f"could not write the textfile in {request.textfile}: {exc.strerror or exc}")


def run_check(
    words: list[str], *, request: CheckRequest, json_out: bool, markdown: bool, parallel: int,
    config_path: str | None, store_path: str | None,
) -> int:
    form = output_format(json_out, markdown)
    if request.nhc and form != "terminal":
        raise UserError("--nhc prints one line: it cannot be combined with --json or --markdown")
    for dest in request.notify:
        problem = validate_destination(dest)
        if problem:
            raise UserError(f"--notify: {problem}")
    validate_label(request.baseline)
    if request.textfile is not None:
        check_textfile_folder(request.textfile)
    config, store = load(config_path, store_path)
    targets = resolve_targets(config, words)
    if request.perf:
        targets = [target.with_perf() for target in targets]
    if request.nhc and len(targets) != 1:
        raise UserError(f"--nhc reports on one host, the node it runs on: got {len(targets)} targets")
    try:
        store.ensure_writable()  # before connecting; the error is one line, each host's .prom says so
    except StoreError:
        for target in targets:
            _textfile(request, CheckOutcome(target.name, store_write_ok=False), None, store)
        raise
    request.ignoring = ignoring(config)
    reserve = min(FINISH_S, request.deadline / 4) if request.deadline else 0.0
    with interrupt.deadline(request.deadline, reserve=reserve):
        outcomes = interrupt.run_all(
            lambda t: check_host(t, config, store, request), targets, workers=parallel, name="check",
            late=_late(request, store),
        )
    _print(outcomes, "nhc" if request.nhc else form, request)
    if not request.quiet:  # cron mails stderr too: a stale rule is hygiene, not an alert
        warn_unused_rules(config, request.rule_use)
    codes = {o.exit_code for o in outcomes}
    return EXIT_ERROR if EXIT_ERROR in codes else EXIT_DRIFT if EXIT_DRIFT in codes else EXIT_OK


def _print(outcomes: list[CheckOutcome], form: str, request: CheckRequest) -> None:
    quiet = request.quiet
    err = stderr_console()
    for outcome in outcomes:
        # --nhc's one line already says why the node could not be checked: not again on stderr.
        said = [outcome.error] if outcome.error and form != "nhc" else []
        for message in said + outcome.warnings:
            err.print(Text(clean(host_message(outcome.host, message)), style="red"))
    if form == "json":
        print_json([_json(o) for o in outcomes])
        return
    if form == "nhc":
        lines = [nhc_line(o.error, o.causes()) for o in outcomes]
        sys.stdout.write("".join(f"{line}\n" for line in lines if line))
        sys.stdout.flush()
        return
    for outcome in outcomes:
        # --quiet (cron): only a new or different drift, or its resolution, is news.
        if outcome.result is None or (quiet and outcome.alert is None):
            continue
        if len(outcomes) > 1:
            sys.stdout.write(f"== {clean(outcome.host)} ==\n")
            sys.stdout.flush()
        print_report(outcome.result, form, show_ignored=request.show_ignored)


def _json(outcome: CheckOutcome) -> dict[str, Any]:
    entry: dict[str, Any] = {"host": outcome.host, "exit_code": outcome.exit_code}
    if outcome.error:
        entry["error"] = outcome.error
    if outcome.result is not None:
        entry.update(outcome.result.to_json())
    entry["alert"] = outcome.alert.value if outcome.alert else None
    return entry
