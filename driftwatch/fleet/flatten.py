"""One host's snapshot as comparable facts: fact path → value, with identity left out.

Hosts that should be alike still differ by nature in hostname, boot id, machine id, GPU
UUIDs, bus ids, pids, start times and timestamps; those never become facts here, so they
can never be outliers. Collections are keyed by what makes them "the same thing" on
another host: GPUs by position, files by path, distributions by interpreter and name.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from driftwatch.diff.change import Severity
from driftwatch.diff.context import as_dict
from driftwatch.diff.generic import CATEGORY_BY_PROBE
from driftwatch.fleet.areas import AREAS
from driftwatch.fleet.facts import Fact, FactMap, HostView, walk
from driftwatch.fleet.runtime import launch_facts
from driftwatch.model import ProbeStatus, Snapshot


def generic(probe: str, facts: dict[str, Any], prefix: str | None = None) -> FactMap:
    """Every leaf as a low-severity fact: a probe or field without rules is still compared."""
    category = CATEGORY_BY_PROBE.get(probe, "system")
    out: FactMap = {}
    for path, value in walk(facts):
        name = ".".join(path)
        where = prefix or probe
        out[f"{where}.{name}"] = Fact(probe, category, name, f"{where} {name}", value, Severity.low)
    return out


def interpreter_labels(snapshots: dict[str, Snapshot]) -> tuple[dict[str, dict[str, str]], bool]:
    """Interpreters named the same on every host keep their name; else they match by position.

    Hosts configured with different interpreter paths (one venv per host) still compare
    "the first configured interpreter" with each other, which is what the config means.
    """
    keys = {host: list(_interpreter_keys(snap)) for host, snap in snapshots.items()}
    known = [k for k in keys.values() if k]
    if all(k == known[0] for k in known):
        return {host: {k: k for k in ks} for host, ks in keys.items()}, False
    return {host: {k: f"python #{i + 1}" for i, k in enumerate(ks)} for host, ks in keys.items()}, True


def _interpreter_keys(snapshot: Snapshot) -> Iterator[str]:
    seen = as_dict(snapshot.facts("python").get("interpreters")) or as_dict(
        snapshot.facts("cuda").get("torch")
    )
    yield from (str(k) for k in seen)


def probe_fact(name: str, status: ProbeStatus, error: str | None) -> Fact:
    severity = {ProbeStatus.ok: Severity.low, ProbeStatus.skipped: Severity.medium}.get(
        status, Severity.high
    )
    why = f"; {name} facts of a host where it is not ok are not compared" if status is not ProbeStatus.ok else ""
    return Fact("", "probe", name, f"{name} probe", status.value, severity, why=why,
                note=" ".join((error or "").split())[:120])


def flatten(snapshot: Snapshot, view: HostView) -> FactMap:
    """Every comparable fact of one host, by fact path."""
    out: FactMap = {}
    for name, record in snapshot.probes.items():
        out[f"probe[{name}]"] = probe_fact(name, record.status, record.error)
        if record.status is not ProbeStatus.ok:
            continue  # a hung nvidia-smi is not "no GPUs": its facts say nothing
        area = AREAS.get(name)
        if area is None:
            out.update(generic(name, record.facts))
            continue
        try:
            facts, handled = area(record.facts, view)
        except (TypeError, AttributeError, KeyError, ValueError):
            # Facts of an unexpected shape (a foreign or older probe) are still compared.
            facts, handled = {}, frozenset()
        out.update(facts)
        out.update(generic(name, {k: v for k, v in record.facts.items() if k not in handled}))
    out.update(launch_facts(snapshot))
    return out

