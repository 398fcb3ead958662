"""compare_fleet: several hosts' snapshots in, the facts they disagree on out, ranked.

For each fact path the hosts' values are counted. A value held by more than half of the
hosts is the majority and every other host is an outlier with its value; with no such
value (two hosts that differ, a 50/50 split) every value is listed with its hosts and no
host is called odd. Hosts are gathered one at a time first (gather.py), so a thousand
stored snapshots never sit in memory at once. Pure: no I/O, no printing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any

from driftwatch.diff.change import Change, DiffOptions, Severity, Waiver
from driftwatch.diff.context import DiffContext
from driftwatch.explain.rank import rank_changes
from driftwatch.fleet import explain
from driftwatch.fleet.facts import Fact, HostView
from driftwatch.fleet.gather import Extractor, Gathered, HostFacts
from driftwatch.fleet.perf import OddFigure, perf_findings
from driftwatch.model import Snapshot
from driftwatch.rules.finding import Finding as KnownBad


@dataclass(frozen=True)
class Finding:
    fact: str  # the fact path, e.g. python[python3].dist[nvidia-nccl-cu12]
    category: str
    item: str
    severity: Severity
    explanation: str
    detail: str  # the explanation without leading host names
    majority: tuple[Hashable, int] | None  # (value, how many hosts hold it)
    outliers: tuple[tuple[str, Hashable], ...]
    values: tuple[tuple[Hashable, tuple[str, ...]], ...]  # every value, when no majority
    hosts: int  # hosts that took part in this comparison
    focus: bool = False
    label: str = ""  # how the sentence names the fact: "nvidia-nccl-cu12", "GPU 0 total memory (MiB)"
    # The hosts that hold the majority value, for a report that shows every host's cell
    # (JSON counts them instead: a thousand agreeing hosts are not worth naming).
    majority_hosts: tuple[str, ...] = ()
    # (label, every host's value): two facts with the same words and the same split are
    # one finding (NCCL as a wheel and as the CUDA stack's; torch likewise).
    same_as: tuple[str, frozenset[tuple[str, Hashable]]] = field(default=("", frozenset()), repr=False)

    def to_json(self) -> dict[str, Any]:
        # Hosts that agree with the majority are counted, not named.
        majority = None if self.majority is None else {"value": self.majority[0], "count": self.majority[1]}
        return {
            "category": self.category, "item": self.item, "fact": self.fact,
            "severity": self.severity.value, "explanation": self.explanation, "compared": self.hosts,
            "majority": majority,
            "outliers": [{"host": h, "value": v} for h, v in self.outliers],
            "values": [{"value": v, "hosts": list(hs)} for v, hs in self.values],
        }


@dataclass(frozen=True)
class FleetResult:
    findings: list[Finding]
    summary: dict[str, Any]
    # Findings a config [[ignore]] rule names for every host they name: shown with --all,
    # counted, never an outlier (see driftwatch/triage/).
    ignored: list[tuple[Finding, Waiver]] = field(default_factory=list)
    # Each host's known-bad states (the rules' findings that are more than notes), by host.
    known_bad: dict[str, list[KnownBad]] = field(default_factory=dict)

    @property
    def agree(self) -> bool:
        return not self.findings

    def to_json(self) -> dict[str, Any]:
        return {
            "findings": [f.to_json() for f in self.findings],
            "ignored": [{**f.to_json(), "waiver": w.to_json()} for f, w in self.ignored],
            "summary": self.summary,
            "known_bad": {host: [f.to_json() for f in found] for host, found in self.known_bad.items()},
        }


def compare_fleet(snapshots: Mapping[str, Snapshot], options: DiffOptions | None = None) -> FleetResult:
    """``snapshots``: host name → its snapshot, at least two."""
    if len(snapshots) < 2:
        raise ValueError("a fleet comparison needs at least two hosts")
    extractor, gathered = Extractor(options), Gathered()
    for host, snap in snapshots.items():
        gathered.add(extractor.extract(host, snap))
    return compare_gathered(gathered, options)


def compare_gathered(gathered: Gathered, options: DiffOptions | None = None) -> FleetResult:
    """The hosts gathered one at a time (gather.py), at least two.

    Only probes whose facts differ somewhere are looked at path by path, and only paths
    whose values differ are compared host by host: a thousand alike hosts cost little.
    """
    if len(gathered.hosts) < 2:
        raise ValueError("a fleet comparison needs at least two hosts")
    options = options or DiffOptions()
    base = HostView(DiffContext.from_options(options).focus, {}, False, options.free_memory_threshold_mib)
    views = gathered.views(base)
    maps = {h.name: gathered.probe_facts(h, views[h.name]) for h in gathered.hosts}
    flat: dict[str, Mapping[str, Fact]] = {name: HostFacts(m) for name, m in maps.items()}
    ok = {h.name: h.ok for h in gathered.hosts}
    findings: list[Finding] = []
    for probe in dict.fromkeys(p for m in maps.values() for p in m):
        distinct = list({id(m.get(probe)): m.get(probe) for m in maps.values()}.values())
        if len(distinct) == 1:
            continue  # every host has the very same facts here (or none)
        for path in dict.fromkeys(p for facts in distinct if facts for p in facts):
            if len({facts[path].value if facts and path in facts else None for facts in distinct}) > 1:
                findings += _compare_path(path, flat, ok)
    findings += [_odd_figure(odd) for odd in perf_findings({h.name: h.perf for h in gathered.hosts if h.perf})]
    ranked = _dedupe(_rank(findings))
    # Each host's known-bad states, diagnosed on its whole snapshot as it was read (gather.py).
    known_bad = {h.name: list(h.known_bad) for h in gathered.hosts if h.known_bad}
    return FleetResult(ranked, summarize([h.name for h in gathered.hosts], ranked), known_bad=known_bad)


def _compare_path(path: str, flat: dict[str, Mapping[str, Fact]], ok: dict[str, frozenset[str]]) -> list[Finding]:
    template = next(facts[path] for facts in flat.values() if path in facts)
    # A host whose probe failed says nothing about that probe's facts, nor one that did
    # not read this fact this time.
    takers = [h for h in flat if (not template.probe or template.probe in ok[h])
              and not getattr(flat[h].get(path), "unknown", False)]
    groups: dict[Hashable, list[str]] = {}
    for host in takers:
        anchor = flat[host].get(template.within) if template.within else None
        groups.setdefault(anchor.value if anchor else None, []).append(host)
    found = (_judge(path, template, {h: flat[h].get(path) for h in group}) for group in groups.values())
    return [f for f in found if f is not None]


def _judge(path: str, template: Fact, facts: dict[str, Fact | None]) -> Finding | None:
    values = {host: fact.value if fact else None for host, fact in facts.items()}
    counts = Counter(values.values())
    if len(counts) < 2:
        return None
    present = [f for f in facts.values() if f is not None]
    notes = {host: fact.note for host, fact in facts.items() if fact and fact.note}
    top, top_count = counts.most_common(1)[0]
    why = next((f.why for f in present if f.why), "")  # e.g. only the failed probe has one
    majority: tuple[Hashable, int] | None = None
    outliers: tuple[tuple[str, Hashable], ...] = ()
    spread: tuple[tuple[Hashable, tuple[str, ...]], ...] = ()
    if top_count * 2 > len(values):
        majority = (top, top_count)
        outliers = tuple((h, v) for h, v in values.items() if v != top)
        text, detail = explain.outlier_sentence(template.label, top, top_count, outliers, notes, why)
    else:
        groups = explain.by_value(list(values.items()))
        spread = tuple((v, tuple(hs)) for v, hs in sorted(groups, key=lambda vh: -len(vh[1])))
        text = detail = explain.split_sentence(template.label, spread, why)
    return Finding(
        fact=path, category=template.category, item=template.item,
        severity=max((f.severity for f in present), key=lambda s: s.rank),
        explanation=text, detail=detail, majority=majority, outliers=outliers, values=spread,
        hosts=len(values), focus=any(f.focus for f in present), label=template.label,
        majority_hosts=tuple(h for h, v in values.items() if majority is not None and v == top),
        same_as=(template.label, frozenset(values.items())),
    )


def _odd_figure(odd: OddFigure) -> Finding:
    """A perf figure some hosts are slow on: the median stands where the majority does."""
    return Finding(
        fact=f"perf.{odd.key}", category="perf", item=odd.key, severity=odd.severity, explanation=odd.detail,
        detail=odd.detail, majority=(odd.median, len(odd.values) - len(odd.outliers)), outliers=odd.outliers,
        values=(), hosts=len(odd.values), label=odd.label,
        majority_hosts=tuple(h for h in odd.values if h not in dict(odd.outliers)),
        same_as=(f"perf.{odd.key}", frozenset(odd.values.items())),
    )


def _rank(findings: list[Finding]) -> list[Finding]:
    """The diff's order (severity, category prior, focus), through its own ranking."""
    changes = [
        Change(f.category, f.item, f.majority, f.outliers, f.severity, f.explanation, focus=f.focus)
        for f in findings
    ]
    index = {id(c): i for i, c in enumerate(changes)}
    return [findings[index[id(c)]] for c in rank_changes(changes)]


def _dedupe(findings: list[Finding]) -> list[Finding]:
    """A split reported by two probes is kept once, where it ranks first."""
    seen: set[tuple[str, frozenset[tuple[str, Hashable]]]] = set()
    kept = []
    for finding in findings:
        if finding.same_as not in seen:
            seen.add(finding.same_as)
            kept.append(finding)
    return kept


def summarize(hosts: list[str], findings: list[Finding]) -> dict[str, Any]:
    weight: dict[str, list[int]] = {}
    for finding in findings:
        for host, _ in finding.outliers:
            entry = weight.setdefault(host, [0, 0])
            entry[0], entry[1] = max(entry[0], finding.severity.rank), entry[1] + 1
    # Most severe first, then most findings, then the order the user gave.
    outliers = sorted(weight, key=lambda h: (-weight[h][0], -weight[h][1], hosts.index(h)))
    with_majority = [f for f in findings if f.majority is not None]
    first = None
    if findings:  # the headline's finding: the top one that names an odd host, if any does
        top = (with_majority or findings)[0]
        first = (top.explanation, top.detail, frozenset(h for h, _ in top.outliers))
    counts = {s.value: sum(f.severity is s for f in findings) for s in Severity}
    return {
        "hosts": hosts,
        "outlier_hosts": outliers,
        "agree": not findings,
        "headline": explain.headline(hosts, outliers, first, len(findings)),
        "total": len(findings),
        "counts": counts,
    }
