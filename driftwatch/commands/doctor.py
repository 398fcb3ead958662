"""`driftwatch doctor TARGET|REF...`: every known-bad state of a host, with its fix.

A REF (``HOST@LABEL``, ``HOST@latest``, ``HOST@~N``, a snapshot file) is read from the
store; anything else is a TARGET, snapshotted now and stored (nothing collected is lost)
before it is diagnosed. ``user@host`` is a TARGET unless the store holds snapshots of a
host by that name. One report per host, in the order given.
"""

from __future__ import annotations

import re
from pathlib import Path

from driftwatch.commands.common import emit, load, store_warnings
from driftwatch.commands.diff import output_format
from driftwatch.config import Config, Target, host_watch, resolve_targets
from driftwatch.errors import StoreError
from driftwatch.model import Snapshot
from driftwatch.report.doctor import HostReport, print_terminal, render_markdown, unread_probes
from driftwatch.rules.finding import Diagnosis
from driftwatch.rules.host import RuleOptions
from driftwatch.rules.registry import diagnose
from driftwatch.store import SnapshotStore, resolve_ref

EXIT_OK, EXIT_ERROR, EXIT_FINDINGS = 0, 1, 2


def is_ref(word: str, store: SnapshotStore) -> bool:
    """A stored snapshot rather than a host to connect to."""
    if word.endswith(".json") or ("/" in word and Path(word).exists()):
        return True
    host, sep, selector = word.rpartition("@")
    if not sep or not host or not selector:
        return False
    return selector == "latest" or bool(re.fullmatch(r"~\d+", selector)) or bool(store.paths(host))


def run_doctor(
    words: list[str], *, json_out: bool, markdown: bool, timeout: float | None, parallel: int,
    accept_new_host_key: bool, config_path: str | None, store_path: str | None,
) -> int:
    form = output_format(json_out, markdown)
    config, store = load(config_path, store_path)
    refs = [w for w in words if is_ref(w, store)]
    targets = resolve_targets(config, [w for w in words if w not in refs]) if len(refs) < len(words) else []
    taken = _snapshot_now(targets, config, store, timeout or config.timeout, parallel, accept_new_host_key)
    reports: list[HostReport] = []
    with store_warnings(store):
        for word in words:
            if word in refs:
                reports.append(_stored(word, config, store))
            else:
                reports += [taken[t.name] for t in resolve_targets(config, [word]) if t.name in taken]
    reports = list({id(r): r for r in reports}.values())  # a host named twice is reported once
    emit(form, lambda: [r.to_json() for r in reports], lambda: render_markdown(reports),
         lambda console: print_terminal(console, reports))
    codes = {r.exit_code for r in reports}
    return EXIT_ERROR if EXIT_ERROR in codes else EXIT_FINDINGS if EXIT_FINDINGS in codes else EXIT_OK


def _stored(ref: str, config: Config, store: SnapshotStore) -> HostReport:
    try:
        found = resolve_ref(store, ref)
    except StoreError as exc:
        return HostReport(ref, ref, error=str(exc))
    host = found.snapshot.host.name
    return HostReport(host, f"stored snapshot {found.path}", diagnosis=_diagnose(found.snapshot, config, host),
                      unread=unread_probes(found.snapshot.probes))


def _snapshot_now(
    targets: list[Target], config: Config, store: SnapshotStore, timeout: float, parallel: int, accept_new_host_key: bool
) -> dict[str, HostReport]:
    if not targets:
        return {}
    from driftwatch.commands.snapshot import collect_many  # SSH only when a target is named

    outcomes = collect_many(
        targets, config, store, timeout=timeout, labels=[], parallel=parallel, accept_new_host_key=accept_new_host_key
    )
    reports: dict[str, HostReport] = {}
    for outcome in outcomes:
        name = outcome.target.name
        if outcome.snapshot is None:
            reports[name] = HostReport(name, "no snapshot", error=outcome.error or "nothing collected")
            continue
        source = f"snapshot taken now, stored as {outcome.path}" if outcome.path else "snapshot taken now, not stored"
        reports[name] = HostReport(name, source, _diagnose(outcome.snapshot, config, name), error=outcome.error,
                                   unread=unread_probes(outcome.snapshot.probes))
    return reports


def _diagnose(snapshot: Snapshot, config: Config, host: str) -> Diagnosis:
    focus = host_watch(config, host).focus if host in config.hosts else config.watch.focus
    return diagnose(snapshot, RuleOptions.of(focus, config.rules))
