"""`driftwatch canary`: ask each watched server the canary's prompts and store what it said.

A snapshot holding the canary and the probes it stands on (system, processes), stored and
labelled like any snapshot, so `diff HOST@good HOST@latest` compares two canaries.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from driftwatch.canary.settings import check_url
from driftwatch.commands.snapshot import CanaryAsk, HostOutcome, run_snapshot

from driftwatch.errors import UserError

if TYPE_CHECKING:
    from rich.console import Console


def run_canary(
    words: list[str], *, url: str | None, labels: list[str], json_out: bool, parallel: int,
    accept_new_host_key: bool, config_path: str | None, store_path: str | None,
) -> int:
    if url is not None:
        try:
            check_url(url)
        except ValueError as exc:
            raise UserError(f"--url {exc}") from None

    def report(console: Console, outcomes: list[HostOutcome]) -> None:
        from rich.table import Table
        from rich.text import Text

        from driftwatch.report.canary import canary_rows
        from driftwatch.report.safe import clean

        for outcome in outcomes:
            if outcome.snapshot is None:
                continue
            rows, notes = canary_rows(outcome.snapshot.facts("canary"))
            table = Table(box=None, show_header=False, pad_edge=False, padding=(0, 2, 0, 0))
            for _ in range(3):
                table.add_column(overflow="fold")
            for row in rows:
                table.add_row(*(Text(clean(cell)) for cell in row))
            console.print(table)
            for note in notes:
                console.print(Text("  " + clean(note), style="yellow"))

    return run_snapshot(
        words, labels=labels, json_out=json_out, timeout=None, parallel=parallel,
        accept_new_host_key=accept_new_host_key, config_path=config_path, store_path=store_path,
        canary=CanaryAsk(asked=True, url=url, only=True), report=report, partial=_partial,
    )


def _partial(outcome: HostOutcome) -> bool:
    """A stored canary that could not ask some server, or some prompt, is partial (exit 3)."""
    from driftwatch.report.canary import failed_servers

    return outcome.snapshot is not None and bool(failed_servers(outcome.snapshot.facts("canary")))
