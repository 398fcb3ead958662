"""Which change produced a known-bad state: the rules' findings, tied to the diff's lines.

Both snapshots are diagnosed (``rules.registry.diagnose``, pure like the diff). A finding
the new snapshot holds and the old did not is tied to every drift change whose key is one
of its subjects: that line says so (with observed or predicted, and the fix) and ranks by
the evidence. A known-bad state that appeared or went away with no such change still gets
a line of its own, so the diff never hides one.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from driftwatch.diff.change import Change
from driftwatch.explain.subjects import subject_value
from driftwatch.model import Snapshot
from driftwatch.rules.finding import EVIDENCE, NOTE, Diagnosis, Finding
from driftwatch.severity import Severity


def apply_findings(
    changes: list[Change], before: Diagnosis, after: Diagnosis, sides: tuple[Snapshot, Snapshot] | None = None
) -> tuple[list[Change], list[Finding]]:
    """(the changes with their known-bad states said, the findings new in ``after``)."""
    new = _not_held(after, before)
    gone = _not_held(before, after)
    tied: set[int] = set()
    out = []
    for change in changes:
        produced = [f for f in new if change.drift and (change.category, str(change.item)) in f.subjects]
        tied |= {id(f) for f in produced}
        out.append(_say(change, produced) if produced else change)
    keys = {(c.category, str(c.item)) for c in changes}
    context = {(c.category, str(c.item)) for c in changes if c.status == "context"}
    # Appeared or vanished with no change of its subjects (a reading the diff does not
    # report, a rule's data that changed): a line of its own, on both sides alike.
    out += [_appeared(f, sides) for f in new if id(f) not in tied and _whole(f, before) and not keys & set(f.subjects)]
    out += [_vanished(f, sides) for f in gone if _whole(f, after) and not keys & set(f.subjects)]
    # A state that came only with changes that provably change nothing (a reinstall with
    # identical files under a cache that now seems to predate it) is context like them:
    # shown in their lines, never a new known-bad state that exits 2 or alerts.
    found = [f for f in after.new_since(before) if id(f) in tied or not context & set(f.subjects)]
    return out, found


def sentence(finding: Finding) -> str:
    return f"known-bad state ({finding.evidence}): {finding.why}. Fix: {finding.fix}"


def said_once(ranked: list[Change], findings: list[Finding]) -> list[Change]:
    """A state several changes produced together is said in full on the first of their
    lines (in ranked order); the others point to it."""
    sentences = [(sentence(f), f"known-bad state ({f.evidence}) {f.rule}, as above") for f in findings]
    seen: set[str] = set()
    out = []
    for change in ranked:
        text = change.explanation
        if change.evidence or " — known-bad state (" in text:
            for full, short in sentences:
                if full in text:
                    text = text.replace(full, short) if full in seen else text
                    seen.add(full)
        out.append(change if text == change.explanation else replace(change, explanation=text))
    return out


def _say(change: Change, produced: list[Finding]) -> Change:
    produced = sorted(produced, key=lambda f: -f.severity.rank)
    key = (change.category, str(change.item))
    said = [f"known-bad state ({f.evidence}). Fix: {f.fix}" if key in f.restates else sentence(f) for f in produced]
    text = change.explanation + " — " + "; ".join(said)
    strongest = produced[0].severity
    if strongest.rank < EVIDENCE.rank:
        return replace(change, explanation=text)  # a note or a small problem: said, not ranked up
    severity = strongest if strongest.rank > change.severity.rank else change.severity
    return replace(change, explanation=text, severity=severity, evidence=1 + strongest.rank)


def _appeared(finding: Finding, sides: tuple[Snapshot, Snapshot] | None) -> Change:
    category, item = finding.subjects[0]
    old, new = _values(category, item, sides)
    evidence = 1 + finding.severity.rank if finding.severity.rank >= EVIDENCE.rank else 0
    return Change(category, item, old, new, finding.severity, sentence(finding), evidence=evidence, rule=finding.rule)


def _vanished(finding: Finding, sides: tuple[Snapshot, Snapshot] | None) -> Change:
    category, item = finding.subjects[0]
    old, new = _values(category, item, sides)
    text = f"{GONE}{finding.why}"
    severity = Severity.low if finding.severity is not NOTE else NOTE
    return Change(category, item, old, new, severity, text, rule=finding.rule)


GONE = "known-bad state gone: "  # how a vanished state's own line starts


def _values(category: str, item: str, sides: tuple[Snapshot, Snapshot] | None) -> tuple[Any, Any]:
    if sides is None:
        return None, None
    return subject_value(sides[0], category, item), subject_value(sides[1], category, item)


def _not_held(a: Diagnosis, b: Diagnosis) -> list[Finding]:
    """Findings of ``a`` that ``b`` does not hold (new, or worse). Where the rule could not run
    on ``b`` the state may well have been there: still tied to a change that touches it."""
    return b.not_covering(a.findings)


def _whole(finding: Finding, other: Diagnosis) -> bool:
    """The rule ran on the other side and holds nothing under this finding's identity."""
    return finding.rule in other.ran and finding.identity not in other.identities
