"""Human output for `snapshot` and `list` (`show` is report/show.py)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from driftwatch.facts.fmt import size
from driftwatch.model import ProbeStatus, Snapshot
from driftwatch.report.safe import clean
from driftwatch.store import ListedSnapshot, Location



def probe_summary(snapshot: Snapshot) -> str:
    counts: dict[str, list[str]] = {}
    for name, record in snapshot.probes.items():
        counts.setdefault(record.status.value, []).append(name)
    parts = [f"{len(counts.pop('ok', []))} ok"]
    for status in ("timeout", "error", "skipped"):
        if status in counts:
            parts.append(f"{status}: {', '.join(counts[status])}")
    return "; ".join(parts)


def print_stored(console: Console, snapshot: Snapshot, path: Location) -> None:
    line = Text()
    line.append(clean(snapshot.host.name), style="bold")
    line.append(f": stored {path} in {snapshot.duration_s:.2f}s ({probe_summary(snapshot)})")
    console.print(line)
    for name, record in snapshot.probes.items():
        if record.status in (ProbeStatus.error, ProbeStatus.timeout):
            console.print(Text(f"  {name}: {record.status.value}: {clean(record.error or '')}", style="yellow"))


def print_list(console: Console, rows: list[tuple[str, ListedSnapshot]]) -> None:
    table = Table(box=None, pad_edge=False)
    for column in ("host", "taken at (UTC)", "labels", "size"):
        table.add_column(column)
    table.add_column("file", overflow="fold")
    for host, row in rows:
        if row.error is not None:
            table.add_row(Text(clean(host)), "?", "", Text(f"unreadable: {clean(row.error)}", style="red"), str(row.path))
            continue
        table.add_row(
            Text(clean(host)),
            row.taken_at.strftime("%Y-%m-%d %H:%M:%S") if row.taken_at else "?",
            Text(clean(", ".join(row.labels))),
            "?" if row.size is None else size(row.size),
            str(row.path),
        )
    console.print(table)

