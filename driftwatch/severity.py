"""How bad something is: one scale for the diff's changes and the rules' findings."""

from __future__ import annotations

from enum import Enum


class Severity(str, Enum):
    critical = "critical"
    high = "high"
    medium = "medium"
    low = "low"
    info = "info"

    @property
    def rank(self) -> int:
        """Higher is more severe, so ``s.rank >= Severity.high.rank`` reads as 'at least high'."""
        return _RANK[self]


_RANK = {
    Severity.critical: 4,
    Severity.high: 3,
    Severity.medium: 2,
    Severity.low: 1,
    Severity.info: 0,
}
