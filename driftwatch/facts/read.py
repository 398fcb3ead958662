"""Facts as stored: plain JSON trees that a foreign, older or broken snapshot may shape oddly."""

from __future__ import annotations

import re
from typing import Any

from driftwatch.model import ProbeStatus, Snapshot

Facts = dict[str, Any]

_PEP503 = re.compile(r"[-_.]+")


def normalize_name(name: str) -> str:
    """PEP 503 name, so the focus list matches however the user spelled it."""
    return _PEP503.sub("-", name).lower()


def as_dict(value: Any) -> Facts:
    """Facts from a foreign or broken snapshot may hold anything; treat non-dicts as empty."""
    return value if isinstance(value, dict) else {}


def ok_facts(snapshot: Snapshot, probe: str) -> Facts:
    """A probe's facts when it succeeded; {} when it failed or is absent (nothing to read)."""
    record = snapshot.probes.get(probe)
    return record.facts if record is not None and record.status is ProbeStatus.ok else {}
