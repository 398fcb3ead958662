"""The one line a scheduler's health check reads: LBNL NHC's ``ERROR: <who>: <why>``.

Slurm's recipe (contrib/slurm/driftwatch-healthcheck.sh) drains the node with this line as
the reason, and resumes the node only while the reason still starts with ``PREFIX``, so
the line is one line (host text escaped by ``clean``), bounded, and always starts so.
"""

from __future__ import annotations

from driftwatch.report.safe import clean

PREFIX = "ERROR: driftwatch: "
MAX_LINE = 200  # characters: a drain reason people read in `scontrol show node` or `sinfo -o %E`


def nhc_line(error: str | None, causes: list[str]) -> str | None:
    """Why the node fails its check (``causes``: most likely first), or why it could not
    be checked; None when it passes."""
    if error is not None:
        return _bounded(f"could not check: {error}")
    if not causes:
        return None
    more = f" (+{len(causes) - 1} more)" if len(causes) > 1 else ""
    return _bounded(causes[0], more)


def _bounded(text: str, suffix: str = "") -> str:
    room = MAX_LINE - len(PREFIX) - len(suffix)
    shown = clean(text)
    if len(shown) > room:
        shown = shown[: room - 1] + "…"
    return f"{PREFIX}{shown}{suffix}"
