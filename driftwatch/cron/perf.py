"""``driftwatch_perf_*`` gauges for node_exporter's textfile collector: the perf probe's
figures GPU by GPU, what throttled them, and each section's status.

GPUs are labelled by index, not UUID (a GPU's position is what a fleet dashboard lines
up); the CPU's figures and the all-reduce have ``gpu=""``. A figure that was not measured
has no sample at all (never a 0 that reads as slower); its section says why.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Gauge

from driftwatch.facts.read import as_dict, ok_facts
from driftwatch.facts.figures import figures, measured, split_key
from driftwatch.model import Snapshot
from driftwatch.report.safe import clean

STATUSES = ("ok", "skipped", "refused", "error", "timeout")


def perf_gauges(registry: CollectorRegistry, host: str, snapshot: Snapshot) -> None:
    facts = ok_facts(snapshot, "perf")
    if not facts:
        return
    value = Gauge("driftwatch_perf_figure", "What the host delivered in the perf probe's run: the median of its "
                  "batches, in the unit named (TFLOP/s, GB/s, GFLOP/s).", ["host", "gpu", "figure", "unit"],
                  registry=registry)
    remeasured = Gauge("driftwatch_perf_remeasured", "The figure measured once more in the same run, where it fell "
                       "below the host's history.", ["host", "gpu", "figure", "unit"], registry=registry)
    throttled = Gauge("driftwatch_perf_throttle_share", "Share of nvidia-smi's samples during the perf run with this "
                      "clocks event (throttle) reason set, per GPU.", ["host", "gpu", "reason"], registry=registry)
    section = Gauge("driftwatch_perf_section", "1 for the perf probe section's status (ok, skipped, refused, error, "
                    "timeout), 0 for the others.", ["host", "section", "status"], registry=registry)
    gpus = as_dict(facts.get("gpus"))
    for key, figure in figures(facts).items():
        got = measured(figure)
        if got is None:
            continue
        uuid, name = split_key(key)
        gpu = str(as_dict(gpus.get(uuid)).get("index", "")) if uuid else ""
        labels = (host, gpu, clean(name.removeprefix("cpu.").replace(".", "_") if not uuid else name),
                  clean(str(figure.get("unit") or "")))
        value.labels(*labels).set(got)
        again = figure.get("remeasured")
        if isinstance(again, (int, float)) and not isinstance(again, bool):
            remeasured.labels(*labels).set(again)
    for entry in gpus.values():
        gpu = as_dict(entry)
        for reason, share in as_dict(as_dict(gpu.get("during")).get("throttle")).items():
            if isinstance(share, (int, float)):
                throttled.labels(host, str(gpu.get("index", "")), clean(str(reason))).set(share)
    for name in ("cpu", "gpu"):
        status = as_dict(facts.get(name)).get("status")
        if status is not None:
            for known in STATUSES:
                section.labels(host, name, known).set(1 if status == known else 0)
