"""The comparison core: two snapshots in, ranked and explained changes out.

Pure functions over the snapshot model: no I/O, no printing, no rich. Rules live in
one small module per fact area (packages, cuda, gpu, git, files, system, probes), with
a generic key-by-key walk for anything they do not know; ``rank`` orders the result.

``diff_snapshots`` is imported when first asked for: the engine runs the rulebook
(``driftwatch.rules``), whose rules use this package's helpers (``context``, ``fmt``), so
importing the engine here eagerly would make "rules first, then diff" import in a circle.
"""

from typing import TYPE_CHECKING, Any

from driftwatch.diff.change import Change, DiffOptions, DiffResult, Severity

if TYPE_CHECKING:
    from driftwatch.diff.engine import diff_snapshots

__all__ = ["Change", "DiffOptions", "DiffResult", "Severity", "diff_snapshots"]


def __getattr__(name: str) -> Any:
    if name == "diff_snapshots":
        from driftwatch.diff.engine import diff_snapshots

        return diff_snapshots
    raise AttributeError(f"module 'driftwatch.diff' has no attribute {name!r}")
