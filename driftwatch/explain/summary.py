"""The summary of an explained diff: counts over drift, the most likely cause, the two sides."""

from __future__ import annotations

from typing import Any

from driftwatch.diff.change import Change
from driftwatch.diff.engine import cloned_image
from driftwatch.explain.symptoms import lead
from driftwatch.model import Snapshot
from driftwatch.severity import Severity


def summarize(
    changes: list[Change], old: Snapshot, new: Snapshot, different: bool
) -> dict[str, Any]:
    return {
        **tally(changes),
        "old": _side(old),
        "new": _side(new),
        "different_hosts": different,
        "cloned_image": cloned_image(old, new),
    }


def tally(changes: list[Change]) -> dict[str, Any]:
    """The summary's counts, over ranked changes. Counts, the total and the most likely
    cause are about drift: context findings change nothing that runs, and accepted or
    ignored ones were decided on, so none of them count (nor alert, nor set the exit code)."""
    drift = [change for change in changes if change.drift]
    symptom, cause = lead(drift)
    counts = {s.value: 0 for s in Severity}
    for change in drift:
        counts[change.severity.value] += 1
    statuses = [change.status for change in changes]
    return {
        "total": len(drift),
        "counts": counts,
        "context": statuses.count("context"),
        "accepted": statuses.count("accepted"),
        "ignored": statuses.count("ignored"),
        # The cause under the symptom; None when no recorded change can explain it.
        "most_likely_cause": cause.cause if cause is not None else None,
        "symptom": (symptom.headline or symptom.cause) if symptom is not None else None,
    }


def _side(snapshot: Snapshot) -> dict[str, Any]:
    return {
        "host": snapshot.host.name,
        "hostname": snapshot.host.hostname,
        "taken_at": snapshot.taken_at.isoformat(),
        "labels": list(snapshot.labels),
    }
