"""Fleet comparison: hosts that should be alike, and the odd ones out.

Pure functions over snapshots (no I/O, no printing, no rich): ``flatten`` turns one host's
snapshot into comparable facts with identity left out, ``compare`` counts each fact's
values across hosts, names the outliers and ranks them with the diff's ranking.
"""

from driftwatch.fleet.compare import Finding, FleetResult, compare_fleet

__all__ = ["Finding", "FleetResult", "compare_fleet"]
