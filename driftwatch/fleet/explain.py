"""The words of a fleet report: one sentence per finding, and the headline naming the odd hosts."""

from __future__ import annotations

import re
from collections.abc import Hashable, Sequence

from driftwatch.facts import fmt

# A digest, alone or inside a value ("nvidia/nccl/lib/libnccl.so.2 a7f4c0de…"): shortened as
# diff shows it, a GNU build-id (SHA-1, 40 hex) to 8 characters, a longer digest to 12.
_DIGEST = re.compile(r"(?<![0-9a-f])[0-9a-f]{32,}(?![0-9a-f])")
MAX_HOSTS_NAMED = 4


def show(value: Hashable) -> str:
    """A value for a sentence: bounded, digests shortened, nothing reads as empty."""
    if value is None:
        return "absent"
    if isinstance(value, tuple):
        return ", ".join(show(v) for v in value) if value else "none"
    if isinstance(value, str):
        value = _DIGEST.sub(_short_digest, value)
    return fmt.value(value)


def _short_digest(found: re.Match[str]) -> str:
    digest = found.group()
    return digest[: 8 if len(digest) == 40 else 12] + "…"


def hosts_text(hosts: Sequence[str]) -> str:
    return fmt.listing(list(hosts), MAX_HOSTS_NAMED)


def by_value(pairs: Sequence[tuple[str, Hashable]]) -> list[tuple[Hashable, list[str]]]:
    """Hosts grouped by their value, in first-seen order."""
    groups: dict[Hashable, list[str]] = {}
    for host, value in pairs:
        groups.setdefault(value, []).append(host)
    return list(groups.items())


def outlier_sentence(
    label: str, majority: Hashable, count: int, outliers: Sequence[tuple[str, Hashable]],
    notes: dict[str, str], why: str,
) -> tuple[str, str]:
    """(explanation, detail): "gpu03: X 2.21.5 where the other 7 hosts have 2.27.3", and the
    same without the leading host names, for a headline that has named them already."""
    if majority is None:
        others = f"where it is absent on the other {fmt.plural(count, 'host')}"
    else:
        others = f"where the other {fmt.plural(count, 'host')} {'has' if count == 1 else 'have'} {show(majority)}"
    groups = by_value(outliers)
    if len(groups) == 1:
        value, hosts = groups[0]
        note = f" ({notes[hosts[0]]})" if len(hosts) == 1 and notes.get(hosts[0]) else ""
        detail = f"{label} {show(value)}{note} {others}{why}"
        return f"{hosts_text(hosts)}: {detail}", detail
    parts = "; ".join(f"{show(value)} on {hosts_text(hosts)}" for value, hosts in groups)
    text = f"{label}: {parts}, {others}{why}"
    return text, text


def split_sentence(label: str, values: Sequence[tuple[Hashable, Sequence[str]]], why: str) -> str:
    """No majority: every value with its hosts, and nobody called the odd one."""
    parts = "; ".join(f"{show(value)} on {hosts_text(hosts)}" for value, hosts in values)
    return f"{label}: {parts} (no majority){why}"


def headline(
    hosts: Sequence[str], outlier_hosts: Sequence[str], first: tuple[str, str, frozenset[str]] | None,
    total: int,
) -> str:
    """First line of every report. ``first``: (explanation, detail, hosts it names) of the
    top-ranked finding with a majority, or of the top finding when none has one."""
    n = len(hosts)
    if total == 0 or first is None:
        return f"all {n} hosts agree"
    explanation, detail, named = first
    more = f" (+{fmt.plural(total - 1, 'more finding')})" if total > 1 else ""
    if not outlier_hosts:
        return f"no majority among {n} hosts — {explanation}{more}"
    k = len(outlier_hosts)
    lead = f"{k} odd host{'s' if k > 1 else ''} out of {n}: {hosts_text(outlier_hosts)}"
    text = detail if k == 1 and named == {outlier_hosts[0]} else explanation
    return f"{lead} — {text}{more}"
