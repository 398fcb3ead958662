"""What a rule reports: a known-bad state, its fix, and the public reference it rests on.

A finding names its *subjects*: the ``(category, item)`` keys of the diff's changes that
can produce it (``("package", "sgl-kernel")``, ``("env", "NCCL_P2P_DISABLE")``,
``("driver", "driver")``), so that ``diff`` can say which change made the state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from driftwatch.severity import Severity

Subject = tuple[str, str]  # (category, item): a diff Change's key


@dataclass(frozen=True)
class Finding:
    severity: Severity
    why: str  # one line: what is wrong and what it does
    fix: str
    reference: str  # the public issue, release note or document the rule rests on
    subjects: tuple[Subject, ...]
    key: str  # tells this finding from the rule's others ("python3: sglang → torch")
    observed: bool = False  # the snapshot shows the failure (a logged error); else predicted
    # Subjects whose diff line already describes this very state (the shared file's own line):
    # there the diff adds only that it is known-bad, and the fix.
    restates: tuple[Subject, ...] = ()
    rule: str = ""  # the registry's name for the rule, set by diagnose()

    @property
    def identity(self) -> tuple[str, str]:
        return (self.rule, self.key)

    @property
    def evidence(self) -> str:
        return "observed" if self.observed else "predicted"

    def covers(self, other: Finding) -> bool:
        """This finding already says everything ``other`` says: the same state, at least as
        severe, about at least the same subjects (a baseline's smaller problem does not)."""
        return (
            self.identity == other.identity
            and self.severity.rank >= other.severity.rank
            and set(self.subjects) >= set(other.subjects)
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "severity": self.severity.value,
            "why": self.why,
            "fix": self.fix,
            "reference": self.reference,
            "evidence": self.evidence,
            "subjects": [list(s) for s in self.subjects],
            "key": self.key,
        }


@dataclass(frozen=True)
class NotRun:
    """A rule that lacked its facts: it said nothing, and this is why."""

    rule: str
    why: str

    def to_json(self) -> dict[str, str]:
        return {"rule": self.rule, "why": self.why}


# Info findings are notes (NCCL_DEBUG unset): shown, never a reason to exit 2 or alert.
NOTE = Severity.info
# Findings at least this severe are evidence enough to rank a change above the rest.
EVIDENCE = Severity.medium


@dataclass(frozen=True)
class Diagnosis:
    findings: list[Finding]  # most severe first; observed before predicted
    not_run: list[NotRun] = field(default_factory=list)
    ran: frozenset[str] = frozenset()  # rules that had their facts

    @property
    def problems(self) -> list[Finding]:
        """Findings that are more than a note."""
        return [f for f in self.findings if f.severity is not NOTE]

    def counts(self) -> dict[str, int]:
        return {s.value: sum(f.severity is s for f in self.findings) for s in Severity}

    def new_since(self, before: Diagnosis) -> list[Finding]:
        """Findings the earlier diagnosis did not already hold (a known-bad state that is
        new, or worse than the baseline's). A rule that could not run on the earlier
        snapshot proves nothing about it: its findings are not called new."""
        return [f for f in before.not_covering(self.findings) if f.rule in before.ran]

    def not_covering(self, findings: list[Finding]) -> list[Finding]:
        """Those of ``findings`` that no finding of this diagnosis covers."""
        by_identity: dict[tuple[str, str], list[Finding]] = {}
        for mine in self.findings:
            by_identity.setdefault(mine.identity, []).append(mine)
        return [f for f in findings if not any(mine.covers(f) for mine in by_identity.get(f.identity, ()))]

    @cached_property
    def identities(self) -> frozenset[tuple[str, str]]:
        return frozenset(f.identity for f in self.findings)

    def to_json(self) -> dict[str, Any]:
        return {
            "findings": [f.to_json() for f in self.findings],
            "counts": self.counts(),
            "not_run": [n.to_json() for n in self.not_run],
        }
