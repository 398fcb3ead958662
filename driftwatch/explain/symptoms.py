"""Tie the changes to the symptoms they can explain, before ranking.

Each cause gets its rank hints from the snapshot pair: how strongly the symptoms' evidence
names it (``tie``) and whether the server provably never touches it (``untouched``). A cause
the new error names says so in its line: that is observed, not guessed.
"""

from __future__ import annotations

from dataclasses import replace

from driftwatch.diff.change import Change
from driftwatch.explain.evidence import match_weight, names_in, pulled
from driftwatch.explain.touch import touched_packages, untouched
from driftwatch.model import Snapshot

NAMED = 2  # a tie at least this strong is said in the cause's line


def relate(changes: list[Change], new: Snapshot) -> list[Change]:
    symptoms = [c for c in changes if c.symptom and c.drift]
    names: dict[str, int] = {}
    for symptom in symptoms:
        for name, weight in names_in(evidence_text(symptom), symptom.mentions).items():
            names[name] = max(names.get(name, 0), weight)
    pulls = [pattern for symptom in symptoms for pattern in symptom.pulls]
    touched = touched_packages(new)
    out = []
    for change in changes:
        if change.symptom:
            out.append(change)
            continue
        weight, which = match_weight(change, names) if names and change.drift else (0, "")
        if not weight and change.drift and pulled(change, pulls):
            weight = 1
        text = change.explanation
        if weight >= NAMED:
            text += f" — the new error names {which}"
        out.append(replace(change, tie=weight, untouched=untouched(change, touched), explanation=text))
    return out


def evidence_text(symptom: Change) -> str:
    """What the symptom observed: a logged message (its new value), else its line."""
    if isinstance(symptom.new, str) and len(symptom.new) > 20:
        return symptom.new
    return symptom.explanation


def explains(cause: Change, symptom: Change) -> bool:
    """Whether ``cause`` may be named as ``symptom``'s most likely cause: a bounded symptom
    (a probe that now fails) only by a change of what its command reads."""
    return not symptom.bounded or pulled(cause, symptom.pulls)


def lead(ranked: list[Change]) -> tuple[Change | None, Change | None]:
    """What a report heads with, of ranked changes: the first symptom among the drift and
    the cause named under it, the highest cause that can explain it (None: no recorded
    change does); without a symptom, the highest cause."""
    drift = [change for change in ranked if change.drift]
    symptom = next((change for change in drift if change.symptom), None)
    causes = (change for change in drift if not change.symptom)
    if symptom is None:
        return None, next(causes, None)
    return symptom, next((change for change in causes if explains(change, symptom)), None)
