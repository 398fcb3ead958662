"""Human output for `snapshot`, `list` and `show`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from driftwatch.model import ProbeStatus, Snapshot
from driftwatch.report.safe import clean

_STATUS_STYLE = {"ok": "green", "skipped": "dim", "error": "red", "timeout": "yellow"}


def probe_summary(snapshot: Snapshot) -> str:
    counts: dict[str, list[str]] = {}
    for name, record in snapshot.probes.items():
        counts.setdefault(record.status.value, []).append(name)
    parts = [f"{len(counts.pop('ok', []))} ok"]
    for status in ("timeout", "error", "skipped"):
        if status in counts:
            parts.append(f"{status}: {', '.join(counts[status])}")
    return "; ".join(parts)


def print_stored(console: Console, snapshot: Snapshot, path: Path) -> None:
    line = Text()
    line.append(clean(snapshot.host.name), style="bold")
    line.append(f": stored {path} in {snapshot.duration_s:.2f}s ({probe_summary(snapshot)})")
    console.print(line)
    for name, record in snapshot.probes.items():
        if record.status in (ProbeStatus.error, ProbeStatus.timeout):
            console.print(Text(f"  {name}: {record.status.value}: {clean(record.error or '')}", style="yellow"))


def print_list(console: Console, rows: list[tuple[str, Path, Snapshot | None, str | None]]) -> None:
    table = Table(box=None, pad_edge=False)
    for column in ("host", "taken at (UTC)", "labels", "probes"):
        table.add_column(column)
    table.add_column("file", overflow="fold")
    for host, path, snapshot, error in rows:
        if snapshot is None:
            table.add_row(Text(clean(host)), "?", "", Text(f"unreadable: {clean(error)}", style="red"), str(path))
            continue
        table.add_row(
            Text(clean(host)),
            snapshot.taken_at.strftime("%Y-%m-%d %H:%M:%S"),
            Text(clean(", ".join(snapshot.labels))),
            probe_summary(snapshot),
            str(path),
        )
    console.print(table)


def print_show(console: Console, snapshot: Snapshot, path: Path) -> None:
    head = Text()
    head.append(clean(snapshot.host.name), style="bold")
    head.append(f"  {clean(snapshot.host.hostname or '')}  taken {snapshot.taken_at:%Y-%m-%d %H:%M:%S} UTC")
    head.append(f" in {snapshot.duration_s:.2f}s  labels: {clean(', '.join(snapshot.labels)) or '-'}  ({path})")
    console.print(head)
    for name, record in snapshot.probes.items():
        status = Text(f"{record.status.value:<8}", style=_STATUS_STYLE.get(record.status.value, ""))
        line = Text(f"{name:<8} ").append(status)
        line.append(clean(record.error) if record.error else clean(_headline(name, record.facts)))
        console.print(line)


def _headline(probe: str, facts: dict[str, Any]) -> str:
    """One line of the facts that matter most per probe."""
    if probe == "system":
        return f"{facts.get('os_release')}, kernel {facts.get('kernel')}, boot {str(facts.get('boot_id'))[:8]}"
    if probe == "gpu":
        gpus = facts.get("gpus") or {}
        names = sorted({str(g.get("name")) for g in gpus.values()})
        return (
            f"driver {facts.get('driver_version')} (CUDA {facts.get('cuda_version')}), "
            f"{len(gpus)} GPU(s): {', '.join(names)}; {len(facts.get('processes') or {})} compute process(es)"
        )
    if probe == "python":
        parts = []
        for key, interp in (facts.get("interpreters") or {}).items():
            dists = interp.get("distributions") or {}
            parts.append(f"{key}: {interp.get('error') or str(interp.get('version')) + f', {len(dists)} distributions'}")
        return "; ".join(parts)
    if probe == "git":
        return "; ".join(
            f"{key}: {repo.get('error') or str(repo.get('head'))[:10] + (' dirty' if repo.get('dirty') else '')}"
            for key, repo in (facts.get("repos") or {}).items()
        )
    if probe == "files":
        return f"{len(facts.get('files') or {})} file(s)" + (" (truncated)" if facts.get("truncated") else "")
    if probe == "cuda":
        torch = facts.get("torch") or {}
        builds = ", ".join(f"torch {t.get('version')} (CUDA {t.get('cuda')})" for t in torch.values())
        nccl = (facts.get("nccl") or {}).get("distributions") or {}
        return "; ".join(filter(None, [builds, ", ".join(f"{k} {v}" for k, v in nccl.items())])) or "-"
    if probe == "processes":
        servers = facts.get("servers") or {}
        parts = [f"{key}: {' '.join(f'--{k.replace(chr(95), chr(45))} {v}' for k, v in list((srv.get('args') or {}).items())[:6])}"
                 for key, srv in servers.items()]
        return "; ".join(parts) or "no server running"
    if probe == "logs":
        parts = []
        for pattern, log in (facts.get("logs") or {}).items():
            if log.get("error"):
                parts.append(f"{pattern}: {log['error']}")
                continue
            state = "ready" if log.get("ready") else "not ready"
            errors = ", ".join(str(e.get("kind")) for e in log.get("errors") or [])
            parts.append(f"{log.get('path')}: {log.get('kind') or 'unknown'} log, {state}" + (f", errors: {errors}" if errors else ""))
        return "; ".join(parts)
    return f"{len(facts)} fact(s)"
