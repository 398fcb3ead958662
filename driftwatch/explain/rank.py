"""Most likely cause first.

Evidence decides first: a change that produced a known-bad state (a rule's finding, see
``explain/known_bad.py``) outranks one that merely changed. Then severity; within a severity, the
category prior encodes where regressions
usually come from: the driver and CUDA stack, then how the server was launched, then the
packages the user said matter, then who else holds GPU memory, then source edits.
"""

from __future__ import annotations

from driftwatch.diff.change import Change

_RUN_CONFIG = ("launch-arg", "env", "process", "log")
CATEGORY_PRIOR: dict[str, int] = {
    "driver": 0,
    "cuda": 1,
    "nccl": 1,
    **{category: 2 for category in _RUN_CONFIG},
    # "package" with focus → 3 (see prior()); other packages fall to the rest.
    "gpu-process": 4,
    "git": 5,
    "file": 5,
}
FOCUS_PACKAGE_PRIOR = 3
REST_PRIOR = 6


def prior(change: Change) -> int:
    if change.category == "package":
        return FOCUS_PACKAGE_PRIOR if change.focus else REST_PRIOR
    return CATEGORY_PRIOR.get(change.category, REST_PRIOR)


def rank_changes(changes: list[Change]) -> list[Change]:
    """Drift before the rest (context, accepted, ignored); then by evidence (a change that
    produces a known-bad state), severity, category prior, magnitude; ties keep their order
    (sort is stable)."""
    return sorted(changes, key=lambda c: (not c.drift, -c.evidence, -c.severity.rank, prior(c), -c.magnitude))
