"""What a fleet comparison is made of: one host's comparable facts, and the helpers the
fact areas share. The bottom of fleet/'s import tree: it imports nothing from fleet/.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, field
from typing import Any

from driftwatch.diff.change import Severity
from driftwatch.facts.read import normalize_name
from driftwatch.model import VOLATILE_KEY

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
    # Not read this time on this host (a file left unhashed for time): it says nothing, and
    # the host is left out of this fact's comparison, as a host whose probe failed is.
    unknown: bool = False


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


Area = Callable[[dict[str, Any], HostView], tuple[FactMap, frozenset[str]]]


def is_focus(name: str, view: HostView) -> bool:
    return normalize_name(name) in view.focus
