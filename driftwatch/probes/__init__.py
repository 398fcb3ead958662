"""The probes, one module each. `driftwatch.probes.registry` lists the ones that run."""
