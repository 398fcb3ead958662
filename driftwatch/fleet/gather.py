"""Hosts' comparable facts, gathered one host at a time: a thousand hosts in bounded memory.

A fleet's hosts are mostly alike, so what is kept is what differs. Each probe of a host
becomes a *block* named by a digest of its comparable content; hosts with the same
content share one block, turned into facts once, and a host is kept as a dozen digests.
Memory grows with the number of distinct states in the fleet, not with its hosts, and
no snapshot outlives its extraction (``Extractor.extract``). Two kinds of block:

- **flattened as read** (system, gpu, git, processes, logs, launch settings, probes
  without rules): the facts of ``flatten`` itself, digested;
- **kept raw, flattened at the end** once per distinct content: ``python``, ``cuda`` and
  ``libraries``, whose fact names depend on every host's interpreters
  (``FLEET_VIEW_AREAS``), and ``files``, thousands of entries that would cost more to
  flatten per host than to read.
  Their digest covers everything their areas read: the facts without identity keys and
  volatile readings (``comparable``; ``python_content`` and ``files_content`` beside
  their areas take the same from thousands of entries without a walk of every value).

Pure: no I/O. Digests are stable across processes (marshal, not ``hash``), so workers
in other processes can extract and send only digests the receiver has not seen.
"""

from __future__ import annotations

import hashlib
import marshal
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from driftwatch.diff.change import DiffOptions
from driftwatch.diff.context import DiffContext
from driftwatch.fleet.areas import FLEET_VIEW_AREAS, python_content
from driftwatch.fleet.facts import IDENTITY_KEYS, Fact, FactMap, HostView
from driftwatch.fleet.flatten import flatten_probe, interpreter_keys, interpreter_labels
from driftwatch.fleet.headline import headline_facts
from driftwatch.fleet.perf import PerfValues, perf_values
from driftwatch.fleet.runtime import files_content, launch_facts
from driftwatch.model import VOLATILE_KEY, ProbeStatus, Snapshot
from driftwatch.rules.finding import Finding as KnownBad
from driftwatch.rules.host import RuleOptions
from driftwatch.rules.registry import diagnose

RAW_PROBES = FLEET_VIEW_AREAS | {"files"}
LAUNCH = "launch"  # the block of launch settings (processes' argv with the logs' arguments)
_DROP = IDENTITY_KEYS | {VOLATILE_KEY}
_SCALARS = (str, int, float, bool, type(None))


@dataclass(frozen=True)
class RawProbe:
    """A probe's record, to be flattened at the end with the fleet's interpreter labels."""

    status: ProbeStatus
    error: str | None
    facts: dict[str, Any]


@dataclass(frozen=True)
class Block:
    probe: str
    digest: bytes
    # The content, sent once per extractor: later hosts with the same digest carry none.
    facts: FactMap | None = None
    raw: RawProbe | None = None


@dataclass(frozen=True)
class HostExtract:
    host: str
    taken_at: datetime
    ok: frozenset[str]  # probes that succeeded: only they say something about their facts
    interpreters: tuple[str, ...]
    blocks: tuple[Block, ...]
    known_bad: tuple[KnownBad, ...] = ()  # the rules' verdicts on the whole snapshot (doctor's problems)
    headline: dict[str, str] = field(default_factory=dict)  # a dozen short facts, for a matrix of hosts
    perf: PerfValues = field(default_factory=dict)  # measured figures: compared by their median, not by value


def comparable(value: Any) -> Any:
    """``value`` without identity keys and volatile readings, as nested lists (marshallable)."""
    if isinstance(value, dict):
        return [(k, v if type(v) in _SCALARS else comparable(v)) for k, v in value.items() if k not in _DROP]
    if isinstance(value, list | tuple):
        return [v if type(v) in _SCALARS else comparable(v) for v in value]
    return value if type(value) in _SCALARS else repr(value)


# What the big raw areas read, taken without a walk of every value (python: 800 distributions,
# files: 5,000 files); the other raw areas are small enough for ``comparable``.
CONTENT: dict[str, Callable[[dict[str, Any]], Any]] = {"python": python_content, "files": files_content}


def _digest(kind: str, content: Any) -> bytes:
    try:
        data = marshal.dumps((kind, content), 2)  # version 2: no back-references, the same bytes everywhere
    except ValueError:  # a value marshal does not take (JSON never has one; a safety net)
        data = repr((kind, content)).encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).digest()[:16]  # OpenSSL's sha256: the fastest digest here (0.5 ms a MB)


def _fact_tuple(path: str, fact: Fact) -> tuple[Any, ...]:
    return (path, fact.probe, fact.category, fact.item, fact.label, comparable(fact.value), fact.severity.value,
            fact.within, fact.focus, fact.why, fact.note)


class Extractor:
    """Turns snapshots into ``HostExtract``s, remembering which block contents it has sent."""

    def __init__(self, options: DiffOptions | None = None) -> None:
        options = options or DiffOptions()
        focus = DiffContext.from_options(options).focus
        # Areas flattened as read need no interpreter labels; python and cuda wait for them.
        self.view = HostView(focus, {}, False, options.free_memory_threshold_mib)
        self.rules = RuleOptions(focus=focus, version_rules=tuple(options.version_rules))
        self._sent: set[bytes] = set()

    def extract(self, host: str, snapshot: Snapshot) -> HostExtract:
        blocks = [self._probe_block(name, record.status, record.error, record.facts)
                  for name, record in snapshot.probes.items()]
        blocks.append(self._facts_block(LAUNCH, launch_facts(snapshot)))
        ok = frozenset(n for n, r in snapshot.probes.items() if r.status is ProbeStatus.ok)
        known_bad = tuple(diagnose(snapshot, self.rules).problems)
        return HostExtract(
            host, snapshot.taken_at, ok, interpreter_keys(snapshot), tuple(blocks), known_bad, headline_facts(snapshot),
            perf_values(snapshot),
        )

    def _probe_block(self, name: str, status: ProbeStatus, error: str | None, facts: dict[str, Any]) -> Block:
        if name not in RAW_PROBES:
            return self._facts_block(name, flatten_probe(name, status, error, facts, self.view))
        content = CONTENT.get(name, comparable)(facts) if status is ProbeStatus.ok else None
        digest = _digest(f"raw:{name}", (status.value, error, content))
        raw = None if digest in self._sent else RawProbe(status, error, facts)
        self._sent.add(digest)
        return Block(name, digest, raw=raw)

    def _facts_block(self, name: str, facts: FactMap) -> Block:
        digest = _digest(f"facts:{name}", tuple(_fact_tuple(p, f) for p, f in facts.items()))
        payload = None if digest in self._sent else facts
        self._sent.add(digest)
        return Block(name, digest, facts=payload)


@dataclass
class _Host:
    name: str
    ok: frozenset[str]
    interpreters: tuple[str, ...]
    blocks: dict[str, bytes]  # probe → digest
    known_bad: tuple[KnownBad, ...] = ()
    headline: dict[str, str] = field(default_factory=dict)
    perf: PerfValues = field(default_factory=dict)


@dataclass
class Gathered:
    """The fleet so far: each host as digests, each distinct block once."""

    hosts: list[_Host] = field(default_factory=list)
    _blocks: dict[bytes, Block] = field(default_factory=dict)
    _flat: dict[tuple[bytes, tuple[tuple[str, str], ...], bool], FactMap] = field(default_factory=dict)

    def learn(self, extract: HostExtract) -> None:
        """Keep the block contents ``extract`` carries (also from a host that is not compared:
        a later host with the same content arrives without it)."""
        for block in extract.blocks:
            if block.digest not in self._blocks and (block.facts is not None or block.raw is not None):
                self._blocks[block.digest] = block

    def add(self, extract: HostExtract) -> None:
        """Compare this host too. Extracts may arrive in any order: a block's content can come
        with a later one (``learn``), as long as it has come by ``probe_facts``."""
        self.learn(extract)
        digests = {b.probe: b.digest for b in extract.blocks}
        self.hosts.append(
            _Host(extract.host, extract.ok, extract.interpreters, digests, extract.known_bad, extract.headline,
                  extract.perf)
        )

    def views(self, view: HostView) -> dict[str, HostView]:
        """Each host's view with the fleet's interpreter labels (by name, or by position)."""
        labels, by_position = interpreter_labels({h.name: h.interpreters for h in self.hosts})
        return {
            h.name: HostView(view.focus, labels[h.name], by_position, view.memory_threshold_mib) for h in self.hosts
        }

    def probe_facts(self, host: _Host, view: HostView) -> dict[str, FactMap]:
        """A host's facts, probe by probe; hosts with the same block share the same FactMap object."""
        out: dict[str, FactMap] = {}
        for probe, digest in host.blocks.items():
            block = self._blocks.get(digest)
            if block is None:
                raise ValueError(f"{host.name}: the content of its {probe} block never arrived")
            if block.facts is not None:
                out[probe] = block.facts
                continue
            assert block.raw is not None
            key = (digest, tuple(sorted(view.interpreters.items())), view.interpreters_by_position)
            if key not in self._flat:
                raw = block.raw
                self._flat[key] = flatten_probe(probe, raw.status, raw.error, raw.facts, view)
            out[probe] = self._flat[key]
        return out


class HostFacts(Mapping[str, Fact]):
    """One host's facts as one mapping, over its probes' shared FactMaps."""

    def __init__(self, maps: dict[str, FactMap]) -> None:
        self.maps = maps

    def __getitem__(self, path: str) -> Fact:
        for facts in self.maps.values():
            if path in facts:
                return facts[path]
        raise KeyError(path)

    def __iter__(self) -> Iterator[str]:
        for facts in self.maps.values():
            yield from facts

    def __len__(self) -> int:
        return sum(len(f) for f in self.maps.values())
