"""gather: a fleet kept as digests, each distinct block once, and compared the same way."""

from __future__ import annotations

from driftwatch.diff import DiffOptions
from driftwatch.fleet.compare import compare_gathered
from driftwatch.fleet.gather import Extractor, Gathered
from driftwatch.model import Snapshot
from tests.diff.builders import dists, make_snapshot
from tests.fleet.builders import host_facts, old_nccl


def host(n: int, edit: object = None) -> Snapshot:
    facts = host_facts(n)
    for entry in facts["files"]["files"].values():
        entry["mtime"] += n  # copied at another moment: identity
    for dist in dists(facts).values():
        dist["installed_at"] += n  # installed at another moment: identity
    if callable(edit):
        edit(facts)
    return make_snapshot(host=f"gpu{n:02d}", minutes=n, **facts)


def test_alike_hosts_share_every_block_and_an_odd_one_adds_only_its_own() -> None:
    extractor, gathered = Extractor(), Gathered()
    for n in range(1, 41):
        gathered.add(extractor.extract(f"gpu{n:02d}", host(n, old_nccl if n == 7 else None)))
    probes = len(host(1).probes) + 1  # and the launch settings
    # Identity (hostnames, GPU UUIDs, mtimes, install times) never splits a block; gpu07's
    # NCCL splits its python and cuda blocks, nothing else.
    assert len(gathered._blocks) == probes + 2
    result = compare_gathered(gathered)
    assert result.summary["outlier_hosts"] == ["gpu07"]
    assert result.findings[0].explanation == "gpu07: nvidia-nccl-cu12 2.21.5 where the other 39 hosts have 2.27.3"


def test_a_block_may_arrive_after_a_host_that_refers_to_it() -> None:
    # Worker processes finish in any order: the host that carried a content can come last.
    extractor = Extractor()
    first, second, odd = (extractor.extract(f"gpu0{n}", host(n, old_nccl if n == 3 else None)) for n in (1, 2, 3))
    assert all(b.facts is None and b.raw is None for b in second.blocks), "seen before: digests only"
    gathered = Gathered()
    for extract in (second, odd, first):
        gathered.add(extract)
    result = compare_gathered(gathered, DiffOptions())
    assert result.summary["outlier_hosts"] == ["gpu03"]


def test_interpreters_named_differently_are_matched_by_position_at_the_end() -> None:
    def other_venv(facts: dict) -> None:
        interps = facts["python"]["interpreters"]
        interps["/opt/venv/bin/python"] = interps.pop("python3")
        facts["cuda"]["torch"]["/opt/venv/bin/python"] = facts["cuda"]["torch"].pop("python3")
        interps["/opt/venv/bin/python"]["distributions"]["torch"]["version"] = "2.9.0+cu128"

    extractor, gathered = Extractor(), Gathered()
    for n in (1, 2, 3):
        gathered.add(extractor.extract(f"gpu0{n}", host(n, other_venv if n == 3 else None)))
    result = compare_gathered(gathered)
    assert result.summary["outlier_hosts"] == ["gpu03"]
    assert any(f.item == "torch" and "2.9.0+cu128" in f.explanation for f in result.findings)


def test_areas_that_read_the_fleets_interpreter_labels_are_flattened_at_the_end() -> None:
    # An area flattened as each host is read sees no labels yet: one that reads them must
    # be listed in FLEET_VIEW_AREAS, or hosts with other interpreter paths are compared wrong.
    import inspect

    from driftwatch.fleet.areas import AREAS, FLEET_VIEW_AREAS
    from driftwatch.fleet.gather import RAW_PROBES

    reading = {name for name, area in AREAS.items() if "view.interpreters" in inspect.getsource(area)}
    assert reading <= FLEET_VIEW_AREAS <= RAW_PROBES
