"""Take one snapshot of one target: run every probe concurrently over one transport.

Every probe redacts what it knows to be secret (by variable, flag or key name) before it
builds facts; here, each record's strings get one more pass for token formats and URL
credentials, so a probe that forgets (or a new field nobody thought of) cannot store one.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor

from driftwatch.config import Target
from driftwatch.model import HostIdentity, ProbeRecord, ProbeStatus, Snapshot, utcnow
from driftwatch.probes.base import Probe, ProbeContext, ProbeError, ProbeSkipped, ProbeTimeout, Shared
from driftwatch.redact import redact_strings, redact_value
from driftwatch.transport import Transport


def run_probe(probe: Probe, ctx: ProbeContext) -> ProbeRecord:
    """Run one probe; whatever happens becomes a record, never an absence."""
    start = time.monotonic()

    def record(status: ProbeStatus, error: str | None = None, facts: dict | None = None) -> ProbeRecord:
        error, facts = redact_value(error) if error else error, redact_strings(facts or {})
        return ProbeRecord(status=status, duration_s=round(time.monotonic() - start, 3), error=error, facts=facts)

    try:
        return record(ProbeStatus.ok, facts=probe.collect(ctx))
    except ProbeSkipped as exc:
        return record(ProbeStatus.skipped, str(exc))
    except ProbeTimeout as exc:
        return record(ProbeStatus.timeout, str(exc))
    except ProbeError as exc:
        return record(ProbeStatus.error, str(exc))
    except Exception as exc:  # a bug in one probe must not cost the other facts
        return record(ProbeStatus.error, f"internal error in {probe.name} probe: {type(exc).__name__}: {exc}")


def collect_snapshot(
    target: Target,
    transport: Transport,
    probes: Mapping[str, Probe],
    *,
    timeout: float,
    previous: Snapshot | None = None,
    labels: list[str] | None = None,
    earlier: Mapping[str, dict] | None = None,
) -> Snapshot:
    """``earlier``: a probe's facts from an older snapshot, for a probe the previous one
    lacks (an opt-in probe that ran some time ago)."""
    taken_at = utcnow()
    start = time.monotonic()
    shared = Shared()
    contexts = {
        name: ProbeContext(
            transport=transport,
            watch=target.watch,
            timeout=timeout,
            previous=(previous.facts(name) if previous else {}) or dict((earlier or {}).get(name) or {}),
            shared=shared,
        )
        for name in probes
    }
    with ThreadPoolExecutor(max_workers=max(1, len(probes)), thread_name_prefix="probe") as pool:
        futures = {name: pool.submit(run_probe, probe, contexts[name]) for name, probe in probes.items()}
        records = {name: future.result() for name, future in futures.items()}
    hostname = records["system"].facts.get("hostname") if "system" in records else None
    return Snapshot(
        host=HostIdentity(name=target.name, address=getattr(transport, "address", target.address), hostname=hostname),
        taken_at=taken_at,
        duration_s=round(time.monotonic() - start, 3),
        labels=list(labels or []),
        probes=records,
    )
