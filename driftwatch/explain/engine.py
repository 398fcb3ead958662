"""diff_snapshots: the comparison joined with the rulebook, ranked most likely cause first.

``diff/`` says what changed (pure comparison); ``rules/`` says what is known-bad in one
snapshot (pure judgement). This stage, above both, diagnoses each side, ties every
known-bad state the new side gained to the change that produced it (``known_bad``), and
orders the result (``rank``).
"""

from __future__ import annotations

from typing import Any

from driftwatch.diff.change import Change, DiffOptions
from driftwatch.diff.engine import compare_snapshots, context_for
from driftwatch.explain.known_bad import apply_findings, said_once
from driftwatch.explain.rank import rank_changes
from driftwatch.explain.result import DiffResult
from driftwatch.explain.summary import summarize
from driftwatch.explain.symptoms import relate
from driftwatch.model import ProbeStatus, Snapshot
from driftwatch.rules.finding import Diagnosis, Finding
from driftwatch.rules.host import RuleOptions
from driftwatch.rules.registry import diagnose
from driftwatch.severity import Severity


def diff_snapshots(old: Snapshot, new: Snapshot, *, options: DiffOptions | None = None) -> DiffResult:
    ctx = context_for(old, new, options)
    changes: list[Change] = compare_snapshots(old, new, ctx)
    # The rules on both sides: a change that produced a known-bad state says so, and ranks first.
    # Rules read facts only: the same facts on both sides hold the same findings (the
    # common cron case, an unchanged host), so nothing can be new and the rules need not run.
    found: list[Finding] = []
    gone: list[Finding] = []
    after: Diagnosis | None = None
    if _facts(old) != _facts(new):
        rule_options = RuleOptions(focus=ctx.focus, version_rules=tuple(ctx.options.version_rules))
        before, after = diagnose(old, rule_options), diagnose(new, rule_options)
        changes, found = apply_findings(changes, before, after, (old, new))
        gone = after.not_covering(before.findings)
    ranked = said_once(rank_changes(relate(changes, new)), after.findings if after is not None else [])
    summary = summarize(ranked, old, new, ctx.different_hosts)
    summary["known_bad"] = len([f for f in found if f.severity is not Severity.info])
    return DiffResult(changes=ranked, summary=summary, findings=found, after=after, gone=gone)


def _facts(snapshot: Snapshot) -> dict[str, tuple[ProbeStatus, dict[str, Any]]]:
    return {name: (record.status, record.facts) for name, record in snapshot.probes.items()}
