"""What the diff produces: changes, each with a severity and a one-line why.

Plain frozen dataclasses rather than pydantic models: a diff of two large hosts can
produce thousands of changes, and nothing here is read from untrusted input.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from driftwatch.settings import DEFAULT_FOCUS
from driftwatch.severity import Severity


# The categories of PRODUCT.md; a change always carries one of these.
CATEGORIES = (
    "package",
    "python",
    "nccl",
    "cuda",
    "driver",
    "gpu",
    "gpu-process",
    "git",
    "file",
    "system",
    "env",
    "process",
    "launch-arg",
    "log",
    "probe",
    "container",
    "perf",
    "canary",  # an observed symptom: the server's greedy answers changed (diff/canary.py)
)


@dataclass(frozen=True, slots=True)
class Waiver:
    """Why a change is, by a person's decision, not drift: accepted for this host
    (``driftwatch accept``) or ignored by a config ``[[ignore]]`` rule."""

    kind: Literal["accepted", "ignored"]
    reason: str
    by: str = ""  # accepted: user@machine
    at: datetime | None = None  # accepted: when
    until: datetime | None = None
    rule: str = ""  # ignored: which [[ignore]] rule, described

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind, "reason": self.reason, "by": self.by or None,
            "at": self.at.isoformat() if self.at else None,
            "until": self.until.isoformat() if self.until else None,
            "rule": self.rule or None,
        }


@dataclass(frozen=True, slots=True)
class Change:
    category: str
    item: str
    old: Any
    new: Any
    severity: Severity
    explanation: str
    # Ranking hints only, never printed: how big the step is, and whether it touches a
    # package the user told us to watch.
    magnitude: float = 0.0
    focus: bool = False
    # Context: a change that provably changes nothing that runs (a file touched with
    # identical content, a reinstall with identical files, a branch renamed at the same
    # commit). Shown as a clue; never drift: no exit 2, no alert, not counted in metrics.
    context: bool = False
    # How a report names the item when the item is an identity nobody reads (a GPU UUID):
    # "GPU 0 (H200, 00000000:18:00.0)". The item stays the identity (JSON, fingerprints).
    label: str = ""
    # Accepted or ignored: shown as such, never drift (see driftwatch/triage/).
    waiver: Waiver | None = None
    # Why a change someone accepted or ignored counts again: "changed again since accepted
    # (...)", "acceptance expired ...". Never silent: reports print it with the change.
    lapsed: str = ""
    # Rank hint: 1 + the rank of the most severe known-bad state (a rule's finding) this
    # change produced; 0 when it produced none. Evidence outranks a change that merely changed.
    evidence: int = 0
    # A line of its own for a known-bad state (one that appeared or went away with no change
    # of its subjects): the rule's name. ``old``/``new`` stay the subject's fact values.
    rule: str = ""
    # Keys (category, item) of the changes that carry this one: a library a package ships, a
    # package inside a container image. Accepting the carrier accepts this change with it.
    part_of: tuple[tuple[str, str], ...] = ()
    # Keys of the changes this one explains as a whole and heads (an image moved under its
    # reference: the packages inside it; a compile cache reused under the variables its key
    # misses: those variables' changes). Ranked above the first of them.
    carries: tuple[tuple[str, str], ...] = ()
    # An observed effect, not a cause: a server that stopped, new errors in its log, a probe
    # that now fails, changed canary answers, a slower GPU. A report heads with it; the
    # changes that can cause it are ranked under it (explain/rank.py).
    symptom: bool = False
    # One clause for a report's first line when the explanation is longer than a headline
    # wants (a symptom's error without where it was logged); the explanation when empty.
    headline: str = ""
    # What the evidence names (a symptom's SONAMEs, symbols, modules, paths, env names), for
    # pulling up the changes it points at; more than the explanation's own words.
    mentions: tuple[str, ...] = ()
    # A symptom's likely causes by kind, when its text names none: ``category`` or
    # ``category:item`` globs (a changed canary answer pulls ``package:flashinfer*``, ``cuda``).
    pulls: tuple[str, ...] = ()
    # The ``pulls`` are all that can cause the symptom: a probe's command reads only its own
    # layer (nvidia-smi hangs with the driver or the host, never with a launch flag), so a
    # change they do not name is never called its cause (explain/symptoms.py: ``explains``).
    bounded: bool = False
    # Rank hints set by explain/, never printed as such: how strongly the symptom's evidence
    # names this change (explain/evidence.py), and whether the server provably never touches
    # it (explain/touch.py).
    tie: int = 0
    untouched: bool = False

    @property
    def shown_item(self) -> str:
        return self.label or str(self.item)

    @property
    def cause(self) -> str:
        """The explanation as a most likely cause, with why an accepted change counts again."""
        return f"{self.explanation} — {self.lapsed}" if self.lapsed else self.explanation

    @property
    def status(self) -> str:
        """drift, context, accepted or ignored: what a report files the change under."""
        if self.waiver is not None:
            return self.waiver.kind
        return "context" if self.context else "drift"

    @property
    def drift(self) -> bool:
        return not self.context and self.waiver is None

    def to_json(self) -> dict[str, Any]:
        return {
            "category": self.category,
            "item": self.item,
            "old": self.old,
            "new": self.new,
            "severity": self.severity.value,
            "explanation": self.explanation,
            "drift": self.drift,
            "status": self.status,
            "waiver": self.waiver.to_json() if self.waiver else None,
            "lapsed": self.lapsed or None,
            "rule": self.rule or None,
            "role": "symptom" if self.symptom else "cause",
        }


@dataclass(frozen=True)
class DiffOptions:
    include_volatile: bool = False  # the CLI's --all (diff)
    free_memory_threshold_mib: int = 1024
    focus: list[str] = field(default_factory=lambda: list(DEFAULT_FOCUS))
    version_rules: tuple[Any, ...] = ()  # rules.versions.VersionRule: the config's [[rules]]
