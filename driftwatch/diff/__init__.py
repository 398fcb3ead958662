"""The comparison core: two snapshots in, every change between them out.

Pure functions over the snapshot model: no I/O, no printing, no rich, and no judgement:
the rulebook (``driftwatch.rules``) is never imported here. One small module per fact
area (packages, cuda, gpu, git, files, system, probes), with a generic key-by-key walk for
anything they do not know; ``engine.compare_snapshots`` runs them. Ranking the changes and
tying them to known-bad states is ``driftwatch.explain``'s work.
"""

from driftwatch.diff.change import Change, DiffOptions, Severity

__all__ = ["Change", "DiffOptions", "Severity"]
