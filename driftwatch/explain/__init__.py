"""The explanation: what changed (``diff/``) joined with what is known-bad (``rules/``), ranked.

``diff/`` and ``rules/`` never import each other or this package; this stage is the one
place that reads both. ``diff_snapshots`` is the entry point every command uses.
"""

from driftwatch.explain.engine import diff_snapshots
from driftwatch.explain.result import DiffResult

__all__ = ["DiffResult", "diff_snapshots"]
