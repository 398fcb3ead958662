"""The fleet's known-bad states as a report says them: each state once, with the hosts that
hold it ("every host (12)" when all do), not once per host.

``FleetResult.known_bad`` stays by host (the JSON form, a monitor that reads one host);
the terminal, Markdown and HTML reports read ``shared_states``.
"""

from __future__ import annotations

from dataclasses import dataclass

from driftwatch.fleet import FleetResult
from driftwatch.fleet.explain import hosts_text
from driftwatch.rules.finding import Finding


@dataclass(frozen=True)
class SharedState:
    state: Finding  # the first host's; the others hold one that reads the same
    hosts: list[str]  # in the order the fleet lists its hosts
    spared: list[str]  # the compared hosts that do not hold it

    @property
    def where(self) -> str:
        held, total = len(self.hosts), len(self.hosts) + len(self.spared)
        if not self.spared and held > 1:
            return f"every host ({held})"
        if held > 1 and len(self.spared) < held and len(self.spared) <= SPARED_NAMED:
            return f"every host but {', '.join(self.spared)} ({held} of {total})"
        return hosts_text(self.hosts)


SPARED_NAMED = 2  # "every host but gpu07, gpu12 (10 of 12)"; more spared: the holders are named


def shared_states(result: FleetResult) -> list[SharedState]:
    """Each known-bad state once, most severe first, then the most widely held."""
    held: dict[tuple[str, ...], tuple[Finding, list[str]]] = {}
    for host, found in result.known_bad.items():
        for state in found:
            # What a reader sees of it: two hosts' states that read the same are one line.
            said = (state.rule, state.severity.value, state.why, state.fix, state.reference, state.evidence)
            held.setdefault(said, (state, []))[1].append(host)
    compared = list(result.summary.get("hosts", ()))
    ranked = sorted(held.values(), key=lambda entry: (-entry[0].severity.rank, -len(entry[1])))
    return [SharedState(state, hosts, _spared(compared, hosts)) for state, hosts in ranked]


def _spared(compared: list[str], hosts: list[str]) -> list[str]:
    holding = set(hosts)
    return [host for host in compared if host not in holding]
