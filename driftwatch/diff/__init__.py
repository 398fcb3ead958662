"""The comparison core: two snapshots in, ranked and explained changes out.

Pure functions over the snapshot model: no I/O, no printing, no rich. Rules live in
one small module per fact area (packages, cuda, gpu, git, files, system, probes), with
a generic key-by-key walk for anything they do not know; ``rank`` orders the result.
"""

from driftwatch.diff.change import Change, DiffOptions, DiffResult, Severity
from driftwatch.diff.engine import diff_snapshots

__all__ = ["Change", "DiffOptions", "DiffResult", "Severity", "diff_snapshots"]
