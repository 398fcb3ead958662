"""Most likely cause first, under the symptom it explains.

A symptom (a server that stopped, new errors in its log, a probe that now fails, changed
answers, a slower GPU) is what broke, not why: a report heads with it and ranks the causes
under it. The causes are ordered by the evidence, strongest first:

1. what the symptom's own evidence names (``tie``: the SONAME in ``undefined symbol``, the
   package of the traceback's last frame; ``explain/evidence.py``);
2. a known-bad state the change produced (``evidence``: a rule's finding, see
   ``explain/known_bad.py``); a state unrelated to the symptom never outranks (1);
3. what the server touches: a package it provably never imports or maps ranks below
   (``untouched``; ``explain/touch.py``);
4. severity; within a severity the category prior encodes where regressions usually come
   from: the driver and CUDA stack, then how the server was launched, then the packages the
   user said matter, then who else holds GPU memory, then source edits; then magnitude.

A change that carries others as a whole (an image and the packages inside it: ``carries``)
is placed above the highest of them.
"""

from __future__ import annotations

from driftwatch.diff.change import Change

_RUN_CONFIG = ("launch-arg", "env", "process", "log")
CATEGORY_PRIOR: dict[str, int] = {
    "driver": 0,
    # A container's image moved or the server moved into one: the whole userspace stack changed.
    "container": 0,
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
    """Drift before the rest (context, accepted, ignored); causes before symptoms in the list
    (the report heads with the symptoms); then tie, evidence, touch, severity, category prior,
    magnitude; ties keep their order (sort is stable); carriers above what they carry."""
    ordered = sorted(changes, key=lambda c: (
        not c.drift, c.symptom, -c.tie, -c.evidence, c.untouched, -c.severity.rank, prior(c), -c.magnitude))
    return carriers_first(ordered)


def carriers_first(ordered: list[Change]) -> list[Change]:
    """Move each carrier (``carries``) to just above the first of its parts, when it ranked below it."""
    position = {(c.category, str(c.item)): i for i, c in enumerate(ordered)}
    moves: dict[int, int] = {}  # carrier index → index of its highest part
    for j, carrier in enumerate(ordered):
        parts = [position[key] for key in carrier.carries if key in position]
        highest = min((i for i in parts if ordered[i].drift == carrier.drift), default=None)
        if highest is not None and highest < j:
            moves[j] = highest
    if not moves:
        return ordered
    out = [c for i, c in enumerate(ordered) if i not in moves]
    for carrier, before in sorted(moves.items(), key=lambda m: m[1], reverse=True):
        anchor = ordered[before]
        out.insert(out.index(anchor) if anchor in out else len(out), ordered[carrier])
    return out
