"""Fleet odd-one-out for the perf probe's figures: numbers are never a majority vote.

Each host's measured figures are taken while it is gathered (a few dozen numbers), GPUs
by position like every fleet fact (``gpu[5].gemm_bf16``), and compared at the end among
the hosts that measured them alike (probe version, method, unit, GPU model): a host whose
figure has a robust z-score below −3.5 and lies more than 5% below the median is an
outlier (``diff.perf.fleet_outliers``). The perf record's statuses are ordinary facts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from driftwatch.diff.change import Severity
from driftwatch.facts.figures import drop_severity, figures, fleet_outliers, measured, name_of, split_key
from driftwatch.facts.read import as_dict, ok_facts
from driftwatch.fleet.facts import Fact, FactMap, HostView, freeze
from driftwatch.model import Snapshot

# fleet key → (value, the group it is compared within: version, unit, method, GPU model)
PerfValues = dict[str, tuple[float, tuple[Any, ...]]]
KEYS = frozenset({"version", "bound_s", "cpu", "gpu", "gpus", "all_reduce", "history"})


def perf_values(snapshot: Snapshot) -> PerfValues:
    facts = ok_facts(snapshot, "perf")
    gpus = as_dict(facts.get("gpus"))
    out: PerfValues = {}
    for key, figure in figures(facts).items():
        value = measured(figure)
        if value is None:
            continue
        uuid, name = split_key(key)
        gpu = as_dict(gpus.get(uuid)) if uuid else {}
        where = f"gpu[{gpu.get('index')}].{name}" if uuid else key
        out[where] = (value, (facts.get("version"), figure.get("unit"), figure.get("method"), gpu.get("name")))
    return out


def perf_area(facts: dict[str, Any], view: HostView) -> tuple[FactMap, frozenset[str]]:
    """The sections' statuses as facts (a host whose GPU section failed is an outlier);
    the figures themselves are compared by ``perf_findings``, never value by value."""
    out: FactMap = {}
    for section in ("cpu", "gpu"):
        status = as_dict(facts.get(section)).get("status")
        if status is not None:
            severity = Severity.medium if status in ("error", "timeout") else Severity.low
            out[f"perf.{section}"] = Fact("perf", "perf", section, f"perf {section.upper()} section", freeze(status),
                                          severity)
    return out, KEYS


@dataclass(frozen=True)
class OddFigure:
    """One figure some hosts are the odd ones out on (compare.py makes it a Finding)."""

    key: str
    label: str
    detail: str
    severity: Severity
    median: str
    outliers: tuple[tuple[str, str], ...]
    values: dict[str, float]


def perf_findings(hosts: Mapping[str, PerfValues]) -> list[OddFigure]:
    """Figures whose odd hosts are below the rest of the hosts that measured them alike."""
    groups: dict[tuple[str, tuple[Any, ...]], dict[str, float]] = {}
    for host, values in hosts.items():
        for key, (value, group) in values.items():
            groups.setdefault((key, group), {})[host] = value
    found = []
    for (key, group), values in groups.items():
        odd = fleet_outliers(values)
        if not odd:
            continue
        unit, model = group[1], group[3]
        name = name_of(key.split(".", 1)[1] if key.startswith("gpu[") else key)
        label = f"{name} on GPU {key[4:key.index(']')]}" if key.startswith("gpu[") else name
        median = next(iter(odd.values())).median
        parts = [f"{host} {o.value:.3g} {unit} ({o.below:.0%} below, robust z {o.z:.1f})" for host, o in sorted(odd.items())]
        shown = f" ({str(model).removeprefix('NVIDIA ')})" if model else ""
        detail = (f"{label}{shown}: {'; '.join(parts)}, against the median "
                  f"{median:.3g} {unit} of {len(values)} hosts")
        found.append(OddFigure(
            key=key, label=label, detail=detail, severity=drop_severity(max(o.below for o in odd.values())),
            median=f"{median:.3g} {unit} (median)",
            outliers=tuple((host, f"{o.value:.3g} {unit}") for host, o in sorted(odd.items())), values=values,
        ))
    return found
