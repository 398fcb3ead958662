"""Lay the config's ignore rules over a fleet comparison."""

from __future__ import annotations

from typing import Any

from driftwatch.fleet.compare import FleetResult, summarize
from driftwatch.triage.apply import RuleUse
from driftwatch.triage.ignore import Ignoring


def ignore_findings(result: FleetResult, ignoring: Ignoring, use: RuleUse | None = None) -> FleetResult:
    """A finding is ignored when a live rule names it for every host it names (its
    outliers; with no majority, every host). Ignored findings move to ``result.ignored``."""
    kept, ignored = [], []
    if use is not None:  # a rule for any compared host could have named something
        use.add([n for h in result.summary["hosts"] for n in ignoring.in_scope(h)], set())
    for finding in result.findings:
        hosts = [h for h, _ in finding.outliers] or [h for _, hs in finding.values for h in hs]
        numbers = [ignoring.first(h, finding.category, finding.item) for h in hosts]
        if use is not None:
            use.add([], {n for n in numbers if n is not None})
        live = [n for n in numbers if n is not None and ignoring.live(n)]
        if hosts and len(live) == len(hosts):
            ignored.append((finding, ignoring.waiver(live[0])))
        else:
            kept.append(finding)
    summary: dict[str, Any] = {**result.summary, **summarize(result.summary["hosts"], kept)}
    summary["ignored"] = len(ignored)
    return FleetResult(kept, summary, ignored=ignored, known_bad=result.known_bad)
