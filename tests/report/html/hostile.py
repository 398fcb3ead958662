"""Reports whose host text is hostile: a package named like a script, a file named to
close a table cell and forge another, a version with ``&``, control characters."""

from __future__ import annotations

import copy
from typing import Any

from driftwatch.diff import DiffOptions

from driftwatch.explain import DiffResult, diff_snapshots
from driftwatch.fleet import FleetResult, compare_fleet
from driftwatch.fleet.headline import headline_facts
from driftwatch.history import History, HistoryQuery, walk_history
from driftwatch.model import utcnow
from driftwatch.report.safe import clean
from driftwatch.triage.ignore import Ignoring
from tests.diff.builders import SRT, baseline, dist, dists, make_snapshot
from tests.fleet.builders import Facts, host_facts, old_nccl

# Had it run, the page's title would say so (the browser test reads the title back).
MARKER = "pwned"
PACKAGE = f'<script>document.title="{MARKER}"</script>'
ALERT = "<script>alert(1)</script>"  # a second package; had it run, headless Chromium would hang on the alert
FILE = f"{SRT}/a\"b'c</td><td class=\"cell outlier\">forged<img src=x onerror=\"document.title='{MARKER}'\">.py"
VERSION = "1.0&lt;2 & co"  # shown as typed: not "1.0<2"
CONTROL = "0.3.17\x1b[31m\x07\x00\u202eevil"
CONTROL_SHOWN = clean(CONTROL)  # 0.3.17\x1b[31m\x07\x00\u202eevil, as escapes
RAW_CONTROL = "\x00\x07\x1b\u202e"


def add_hostile(facts: Facts) -> None:
    """The hostile packages (one at VERSION) and file added, sgl-kernel at CONTROL."""
    dists(facts)[PACKAGE] = dist(PACKAGE, VERSION)
    dists(facts)[ALERT] = dist(ALERT, "1.0")
    dists(facts)["sgl-kernel"]["version"] = CONTROL
    facts["files"]["files"][FILE] = {"size": 3, "mtime": 1.0, "mode": "0644", "sha256": "a" * 64, "error": None}


def hostile_diff() -> DiffResult:
    facts = baseline()
    add_hostile(facts)
    return diff_snapshots(make_snapshot(), make_snapshot(minutes=60, **facts), options=DiffOptions())


HOSTS = ("gpu01", "gpu02", "gpu03", "gpu04", "gpu05")
# Where the fleet's outliers are: (host, matrix column). NCCL and sgl-kernel are headline
# columns; the hostile package and file get a column of their own, named by fact path.
OUTLIERS = {
    ("gpu02", "nccl"),
    ("gpu04", "sgl-kernel"),
    ("gpu04", f"python[python3].dist[{PACKAGE}]"),
    ("gpu04", f"python[python3].dist[{ALERT}]"),
    ("gpu04", f"file[{FILE}]"),
    ("gpu05", "system.kernel"),
}


def hostile_fleet() -> tuple[FleetResult, dict[str, dict[str, str]]]:
    """Five hosts: gpu02 has an old NCCL, gpu04 the hostile package, file and sgl-kernel,
    gpu05 another kernel."""
    snapshots = {}
    for n, host in enumerate(HOSTS, start=1):
        facts = host_facts(n)
        if host == "gpu02":
            old_nccl(facts)
        if host == "gpu04":
            add_hostile(facts)
        if host == "gpu05":
            facts["system"]["kernel"] = "6.8.0-1015-nvidia"
        snapshots[host] = make_snapshot(host=host, minutes=n, **facts)
    return compare_fleet(snapshots, DiffOptions()), {h: headline_facts(s) for h, s in snapshots.items()}


def hostile_history() -> History:
    """NCCL upgraded, then the hostile package and file arrive, then the driver changes."""
    states: list[Any] = []
    facts = baseline()
    states.append(make_snapshot(minutes=0, **copy.deepcopy(facts)))
    dists(facts)["nvidia-nccl-cu12"]["version"] = "2.28.3"
    states.append(make_snapshot(minutes=60, **copy.deepcopy(facts)))
    add_hostile(facts)
    states.append(make_snapshot(minutes=120, **copy.deepcopy(facts)))
    facts["gpu"]["driver_version"] = "610.1"
    states.append(make_snapshot(minutes=180, **facts))
    query = HistoryQuery("gpu01", DiffOptions(), Ignoring([], {}, utcnow()))
    return walk_history(states, query)
