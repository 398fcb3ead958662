"""One host's snapshot as comparable facts: fact path → value, with identity left out.

Hosts that should be alike still differ by nature in hostname, boot id, machine id, GPU
UUIDs, bus ids, pids, start times and timestamps; those never become facts here, so they
can never be outliers. Collections are keyed by what makes them "the same thing" on
another host: GPUs by position, files by path, distributions by interpreter and name.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, field
from typing import Any

from driftwatch.diff.change import Severity
from driftwatch.diff.context import as_dict, normalize_name
from driftwatch.diff.generic import CATEGORY_BY_PROBE
from driftwatch.model import VOLATILE_KEY, ProbeStatus, Snapshot

# Keys whose values differ between two healthy, identical hosts (or between two runs of
# one): identities, addresses, process ids and times. Dropped wherever they appear.
IDENTITY_KEYS = frozenset({
    "hostname", "boot_id", "machine_id", "uuid", "gpu_uuid", "serial", "bus_id", "pci_bus_id",
    "address", "addresses", "ip", "mac", "pid", "ppid", "start_time", "started_at",
    "installed_at", "mtime", "ctime", "atime", "inode", "taken_at", "timestamp", "date",
})


@dataclass(frozen=True, slots=True)
class Fact:
    """One comparable fact of one host; ``within`` narrows who it is compared with."""

    probe: str  # compared only among hosts whose probe is ok; "" = always compared
    category: str
    item: str
    label: str  # how the explanation names it: "nvidia-nccl-cu12", "GPU 0 total memory (MiB)"
    value: Hashable
    severity: Severity
    # Another fact's path: compared only among hosts that share that fact's value, so a
    # missing GPU or a different package version is one finding, not one per field.
    within: str | None = None
    focus: bool = False
    why: str = ""  # appended to the explanation
    note: str = ""  # per-host detail (a probe's error), shown next to the host


FactMap = dict[str, Fact]


@dataclass(frozen=True)
class HostView:
    """What flattening one host needs to know besides the snapshot."""

    focus: frozenset[str]
    # This host's interpreter key → the label shared across the fleet (see labels()).
    interpreters: dict[str, str] = field(default_factory=dict)
    interpreters_by_position: bool = False  # keys differ per host: their paths are config
    memory_threshold_mib: int = 1024


def freeze(value: Any) -> Hashable:
    """A hashable, order-stable stand-in for any JSON value."""
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True, default=str)
    if isinstance(value, list | tuple):
        return tuple(freeze(v) for v in value)
    return value if isinstance(value, Hashable) else str(value)


def walk(value: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Hashable]]:
    """Leaves of a fact tree, skipping identity keys and everything under ``volatile``."""
    if not isinstance(value, dict):
        yield path, freeze(value)
        return
    for key, child in value.items():
        if key == VOLATILE_KEY or key in IDENTITY_KEYS:
            continue
        yield from walk(child, (*path, str(key)))


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


Area = Callable[[dict[str, Any], HostView], tuple[FactMap, frozenset[str]]]


def flatten(snapshot: Snapshot, view: HostView) -> FactMap:
    """Every comparable fact of one host, by fact path."""
    from driftwatch.fleet.areas import AREAS  # the areas import Fact from here
    from driftwatch.fleet.runtime import launch_facts

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


def is_focus(name: str, view: HostView) -> bool:
    return normalize_name(name) in view.focus
