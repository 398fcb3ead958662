"""The snapshot document: one JSON file per host per moment, validated on read and write.

Facts are plain JSON (dicts keyed by stable identities: GPU UUID, distribution name,
file path) so that the diff can walk them without knowing every field in advance. Any
mapping stored under a key named ``volatile`` holds readings that change on their own
(temperature, clocks, uptime) and are not drift unless asked for.
"""

from __future__ import annotations

from datetime import datetime, timezone
from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from driftwatch import __version__

# 2: every snapshot is redacted by driftwatch.redact's full rules (webhook and URL
# credentials included); a version-1 snapshot is redacted again when it is read.
SCHEMA_VERSION = 2
VOLATILE_KEY = "volatile"


class ProbeStatus(str, Enum):
    ok = "ok"
    error = "error"
    timeout = "timeout"
    skipped = "skipped"


class ProbeRecord(BaseModel):
    """One probe's outcome. A failed probe is data, never an absence."""

    model_config = ConfigDict(extra="forbid")

    status: ProbeStatus
    duration_s: float = 0.0
    error: str | None = None
    facts: dict[str, Any] = Field(default_factory=dict)


class HostIdentity(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str  # the name the user gave: `local`, an alias, a config host
    address: str  # what was connected to: `local` or `user@host:port`
    hostname: str | None = None  # what the host says it is


class Snapshot(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = SCHEMA_VERSION
    driftwatch_version: str = __version__
    host: HostIdentity
    taken_at: datetime
    duration_s: float
    labels: list[str] = Field(default_factory=list)
    probes: dict[str, ProbeRecord]

    @property
    def complete(self) -> bool:
        return all(p.status in (ProbeStatus.ok, ProbeStatus.skipped) for p in self.probes.values())

    def facts(self, probe: str) -> dict[str, Any]:
        record = self.probes.get(probe)
        return record.facts if record is not None else {}


def utcnow() -> datetime:
    return datetime.now(timezone.utc)
