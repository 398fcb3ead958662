"""The value a known-bad state's subject has in one snapshot: what a line of its own shows.

A finding that appeared with no change of its subjects (a launch flag read from a log on one
side and from argv on the other, a reading the diff does not compare) still gets a line in
the diff; that line's ``old`` and ``new`` are the subject's fact values on each side (0.88
from the good run's log, 0.55 on the server's argv now), never the rule's name. A subject
this module cannot read is None on both sides: unknown, one JSON type.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from driftwatch.facts.launch import launch_settings
from driftwatch.facts.read import as_dict, normalize_name, ok_facts
from driftwatch.model import Snapshot
from driftwatch.rules.host import Host, Missing

Reader = Callable[[Snapshot, str], Any]


def _launch_arg(snapshot: Snapshot, item: str) -> Any:
    setting = launch_settings(snapshot).get(item)
    return setting[0] if setting is not None else None


def _env(snapshot: Snapshot, item: str) -> Any:
    """The first place that sets it, in the rules' order: a server's environment, the login
    shell's, an NCCL configuration file."""
    try:
        sources = Host(snapshot).sources()
    except Missing:
        return None
    return next((source.values[item] for source in sources if item in source.values), None)


def _package(snapshot: Snapshot, item: str) -> Any:
    wanted = normalize_name(item)
    for interp in as_dict(ok_facts(snapshot, "python").get("interpreters")).values():
        for name, dist in as_dict(as_dict(interp).get("distributions")).items():
            if normalize_name(str(name)) == wanted and isinstance(dist, dict):
                return dist.get("version")
    return None


def _driver(snapshot: Snapshot, item: str) -> Any:
    return ok_facts(snapshot, "gpu").get("driver_version")


READERS: dict[str, Reader] = {
    "launch-arg": _launch_arg,
    "env": _env,
    "package": _package,
    "driver": _driver,
}


def subject_value(snapshot: Snapshot, category: str, item: str) -> Any:
    reader = READERS.get(category)
    if reader is None:
        return None
    try:
        return reader(snapshot, item)
    except (TypeError, AttributeError, KeyError, ValueError, IndexError):
        return None  # facts of a foreign shape: unknown, as for a subject nothing reads
