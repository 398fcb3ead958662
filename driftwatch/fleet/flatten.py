"""One host's snapshot as comparable facts: fact path → value, with identity left out.

Hosts that should be alike still differ by nature in hostname, boot id, machine id, GPU
UUIDs, bus ids, pids, start times and timestamps; those never become facts here, so they
can never be outliers. Collections are keyed by what makes them "the same thing" on
another host: GPUs by position, files by path, distributions by interpreter and name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from driftwatch.diff.change import Severity
from driftwatch.facts.read import as_dict
from driftwatch.diff.generic import CATEGORY_BY_PROBE
from driftwatch.fleet.areas import AREAS
from driftwatch.fleet.facts import Fact, FactMap, HostView, walk
from driftwatch.fleet.runtime import launch_facts
from driftwatch.model import ProbeStatus, Snapshot
from driftwatch.settings import OPT_IN_PROBES


def generic(probe: str, facts: dict[str, Any], prefix: str | None = None) -> FactMap:
    """Every leaf as a low-severity fact: a probe or field without rules is still compared."""
    category = CATEGORY_BY_PROBE.get(probe, "system")
    out: FactMap = {}
    for path, value in walk(facts):
        name = ".".join(path)
        where = prefix or probe
        out[f"{where}.{name}"] = Fact(probe, category, name, f"{where} {name}", value, Severity.low)
    return out


def interpreter_labels(keys: Mapping[str, Iterable[str]]) -> tuple[dict[str, dict[str, str]], bool]:
    """``keys``: each host's interpreter keys, in order (``interpreter_keys``).

    Interpreters named the same on every host keep their name; else they match by position.
    Hosts configured with different interpreter paths (one venv per host) still compare
    "the first configured interpreter" with each other, which is what the config means.
    """
    lists = {host: list(ks) for host, ks in keys.items()}
    known = [k for k in lists.values() if k]
    if all(k == known[0] for k in known):
        return {host: {k: k for k in ks} for host, ks in lists.items()}, False
    return {host: {k: f"python #{i + 1}" for i, k in enumerate(ks)} for host, ks in lists.items()}, True


def interpreter_keys(snapshot: Snapshot) -> tuple[str, ...]:
    seen = as_dict(snapshot.facts("python").get("interpreters")) or as_dict(
        snapshot.facts("cuda").get("torch")
    )
    return tuple(str(k) for k in seen)


def probe_fact(name: str, status: ProbeStatus, error: str | None) -> Fact:
    severity = {ProbeStatus.ok: Severity.low, ProbeStatus.skipped: Severity.medium}.get(
        status, Severity.high
    )
    why = f"; {name} facts of a host where it is not ok are not compared" if status is not ProbeStatus.ok else ""
    return Fact("", "probe", name, f"{name} probe", status.value, severity, why=why,
                note=" ".join((error or "").split())[:120])


def flatten_probe(name: str, status: ProbeStatus, error: str | None, facts: dict[str, Any], view: HostView) -> FactMap:
    """One probe's comparable facts: its status, and its facts when it is ok. An opt-in
    probe's status is a fact only when it failed: a host not asked for it says nothing."""
    quiet = name in OPT_IN_PROBES and status is ProbeStatus.ok
    out: FactMap = {} if quiet else {f"probe[{name}]": probe_fact(name, status, error)}
    if status is not ProbeStatus.ok:
        return out  # a hung nvidia-smi is not "no GPUs": its facts say nothing
    area = AREAS.get(name)
    if area is None:
        out.update(generic(name, facts))
        return out
    try:
        found, handled = area(facts, view)
    except (TypeError, AttributeError, KeyError, ValueError):
        # Facts of an unexpected shape (a foreign or older probe) are still compared.
        found, handled = {}, frozenset()
    out.update(found)
    out.update(generic(name, {k: v for k, v in facts.items() if k not in handled}))
    return out


def flatten(snapshot: Snapshot, view: HostView) -> FactMap:
    """Every comparable fact of one host, by fact path."""
    out: FactMap = {}
    for name, record in snapshot.probes.items():
        out.update(flatten_probe(name, record.status, record.error, record.facts, view))
    out.update(launch_facts(snapshot))
    return out
