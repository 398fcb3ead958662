"""What a diff explained is: the ranked changes, their summary, and the known-bad states they made."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from driftwatch.diff.change import Change
from driftwatch.rules.finding import Diagnosis, Finding
from driftwatch.severity import Severity


@dataclass(frozen=True)
class DiffResult:
    changes: list[Change]
    summary: dict[str, Any]
    # Known-bad states the new snapshot holds and the old did not (or held smaller).
    findings: list[Finding] = field(default_factory=list)
    # The new snapshot's whole diagnosis; None when both sides had the same facts (not run).
    after: Diagnosis | None = None
    # New known-bad states that a person decided on with the changes that produced them
    # (accepted or ignored): shown with those changes, never a reason to exit 2 or alert.
    settled: list[Finding] = field(default_factory=list)
    # Known-bad states the old snapshot held and the new does not (a report marks the old
    # value of the change that ended one as the bad one); not part of the JSON form.
    gone: list[Finding] = field(default_factory=list)

    @property
    def drift(self) -> bool:
        """Whether anything changed that can change behaviour (context findings aside)."""
        return any(change.drift for change in self.changes)

    @property
    def drift_changes(self) -> list[Change]:
        return [change for change in self.changes if change.drift]

    @property
    def context_changes(self) -> list[Change]:
        return [change for change in self.changes if change.status == "context"]

    def with_status(self, status: str) -> list[Change]:
        return [change for change in self.changes if change.status == status]

    @property
    def problems(self) -> list[Finding]:
        """New known-bad states that are more than a note: what ``check`` alerts on."""
        return [f for f in self.findings if f.severity is not Severity.info]

    def to_json(self) -> dict[str, Any]:
        return {
            "changes": [c.to_json() for c in self.changes],
            "summary": self.summary,
            "known_bad": [f.to_json() for f in self.findings],
            "known_bad_settled": [f.to_json() for f in self.settled],
        }
