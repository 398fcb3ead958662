"""`fleet --html`: hosts × facts, every outlier cell marked with its majority value on
hover, no majority marked apart, the findings listed as the terminal lists them, and
each known-bad state said once with the hosts that hold it."""

from __future__ import annotations

from driftwatch.config import parse_config
from driftwatch.fleet import FleetResult, compare_fleet
from driftwatch.fleet.headline import headline_facts
from driftwatch.model import ProbeStatus, utcnow
from driftwatch.report.html.fleet import UNCOMPARED, render_fleet
from driftwatch.triage.fleet import ignore_findings
from driftwatch.triage.ignore import Ignoring
from tests.diff.builders import failed, make_snapshot
from tests.diff.test_launch import SGLANG, processes
from tests.fleet.builders import Edit, Facts, fleet, host_facts, kernel
from tests.report.html.dom import Node, parse
from tests.report.html.hostile import OUTLIERS, hostile_fleet
from tests.rules.builders import SGLANG as RULES_SGLANG
from tests.rules.builders import processes as rules_processes
from tests.rules.builders import server


def cells(root: Node, kind: str | None = None) -> dict[tuple[str, str], Node]:
    return {(n.attrs["data-host"], n.attrs["data-fact"]): n for n in root.find_all("td", kind or "cell")}


def headers(root: Node) -> list[str]:
    """The matrix's column titles, table after table, each table's host column once."""
    titles = [th.text for table in root.find_all("table", "matrix") for th in table.find("thead").find_all("th")]
    return ["host", *(t for t in titles if t != "host")]


def with_headlines(count: int, edits: dict[int, Edit]) -> str:
    snapshots = {}
    for n in range(1, count + 1):
        facts: Facts = host_facts(n)
        if n in edits:
            edits[n](facts)
        snapshots[f"gpu{n:02d}"] = make_snapshot(host=f"gpu{n:02d}", minutes=n, **facts)
    result = compare_fleet(snapshots)
    return render_fleet(result, {h: headline_facts(s) for h, s in snapshots.items()})


def test_every_outlier_cell_is_marked_and_no_other() -> None:
    root = parse(render_fleet(*hostile_fleet()))
    assert set(cells(root, "outlier")) == OUTLIERS
    assert not cells(root, "split")
    assert {r.find("th").text for r in root.find("tbody").find_all("tr") if "odd" in r.find("th").classes} == {
        "gpu02", "gpu04", "gpu05",
    }


def test_the_majority_value_is_on_hover() -> None:
    marked = cells(parse(render_fleet(*hostile_fleet())), "outlier")
    nccl = marked["gpu02", "nccl"]
    assert nccl.text == "2.21.5"
    assert nccl.attrs["title"] == "nvidia-nccl-cu12: 2.21.5 here, majority 2.27.3 (4 of 5 hosts)"
    assert marked["gpu05", "system.kernel"].attrs["title"] == (
        "kernel: 6.8.0-1015-nvidia here, majority 5.15.0-171-generic (4 of 5 hosts)"
    )


def test_headline_columns_first_then_one_per_finding() -> None:
    root = parse(render_fleet(*hostile_fleet()))
    assert headers(root)[:11] == [
        "host", "driver", "CUDA (driver)", "CUDA toolkit", "torch", "NCCL", "sglang", "sgl-kernel", "flashinfer",
        "GPU model", "GPUs",
    ]
    assert "memory fraction" not in headers(root)  # no host records one
    agree = cells(root)
    assert agree["gpu01", "driver"].text == "590.48.01" and agree["gpu01", "gpu-count"].text == "2"
    assert "title" not in agree["gpu01", "nccl"].attrs and agree["gpu01", "nccl"].text == "2.27.3"


def test_memory_fraction_is_a_column_when_servers_record_it() -> None:
    def launched(fraction: str) -> Edit:
        return lambda facts: facts.update(processes=processes(*SGLANG, "--mem-fraction-static", fraction))

    root = parse(with_headlines(3, {1: launched("0.88"), 2: launched("0.88"), 3: launched("0.55")}))
    assert "memory fraction" in headers(root)
    assert set(cells(root, "outlier")) == {("gpu03", "mem-fraction")}
    cell = cells(root)["gpu03", "mem-fraction"]
    assert cell.text == "0.55" and "majority 0.88 (2 of 3 hosts)" in cell.attrs["title"]


def test_no_majority_marks_every_value_and_names_no_one_odd() -> None:
    result = fleet(2, {2: kernel("6.8.0-1015-nvidia")})
    root = parse(render_fleet(result))
    split = cells(root, "split")
    assert set(split) == {("gpu01", "system.kernel"), ("gpu02", "system.kernel")} and not cells(root, "outlier")
    assert split["gpu01", "system.kernel"].attrs["title"] == (
        "kernel: no majority (5.15.0-171-generic on gpu01; 6.8.0-1015-nvidia on gpu02)"
    )


def test_a_host_whose_probe_failed_is_marked_there_and_not_compared_elsewhere() -> None:
    def hung(facts: Facts) -> None:
        facts["gpu"] = failed(ProbeStatus.timeout, "nvidia-smi timed out after 10s")

    def other_memory(facts: Facts) -> None:
        next(iter(facts["gpu"]["gpus"].values()))["memory_total_mib"] = 81559

    root = parse(with_headlines(4, {3: hung, 4: other_memory}))
    found = cells(root)
    assert set(cells(root, "outlier")) == {("gpu03", "probe[gpu]"), ("gpu04", "gpu[0].memory_total_mib")}
    assert found["gpu03", "probe[gpu]"].text == "timeout"
    assert found["gpu03", "driver"].text == "—"  # nothing recorded, not "absent"
    assert found["gpu03", "gpu[0].memory_total_mib"].attrs == {
        "class": "cell uncompared", "data-host": "gpu03", "data-fact": "gpu[0].memory_total_mib", "title": UNCOMPARED,
    }


def test_findings_listed_below_by_severity() -> None:
    root = parse(render_fleet(*hostile_fleet()))
    sections = [s for s in root.find_all("section", "group") if "states" not in s.classes]
    assert [s.find("h3").text for s in sections] == ["HIGH (3)", "MEDIUM (1)", "LOW (2)"]
    first = sections[0].find("tr", "finding")
    assert first.find("td", "hosts").text == "gpu02"
    assert first.find("td", "why").text.strip() == "gpu02: nvidia-nccl-cu12 2.21.5 where the other 4 hosts have 2.27.3"


def test_ignored_findings_are_counted_and_listed_with_all() -> None:
    result, headlines = hostile_fleet()
    config = parse_config('[[ignore]]\ncategory = "system"\nitem = "kernel"\nreason = "kernel rollout"\n')
    quiet: FleetResult = ignore_findings(result, Ignoring(config.ignore, config.groups, utcnow()))
    root = parse(render_fleet(quiet, headlines))
    assert ("gpu05", "system.kernel") not in cells(root, "outlier")
    assert root.find("p", "note-line").text == "1 ignored: system kernel (--all shows them)"
    listed = parse(render_fleet(quiet, headlines, show_ignored=True)).find("section", "tone-ignored")
    assert "ignored by" in listed.find("td", "why").text and "kernel rollout" in listed.find("td", "why").text


def test_hosts_left_out_are_named() -> None:
    result, headlines = hostile_fleet()
    result.summary["unreachable"] = [{"host": "gpu09", "error": "connection refused"}]
    subs = [p.text for p in parse(render_fleet(result, headlines)).find_all("p", "sub")]
    assert subs == ["compared: gpu01, gpu02, gpu03, gpu04, gpu05", "left out: gpu09 (connection refused)"]


def p2p_disabled(facts: Facts) -> None:
    facts["processes"] = rules_processes(server(*RULES_SGLANG, "--tp", "1", env={"NCCL_P2P_DISABLE": "1"}))


def states(root: Node) -> list[tuple[str, str]]:
    """(the state's rule, where it holds) for each row of the known-bad section."""
    return [(r.find("span", "rule").text, r.find("td", "where").text) for r in root.find_all("tr", "state")]


def test_a_fleet_wide_known_bad_state_is_said_once() -> None:
    root = parse(with_headlines(5, {n: p2p_disabled for n in range(1, 6)}))
    assert states(root) == [("nccl-p2p-disabled", "every host (5)")]
    [section] = root.find_all("section", "states")
    assert section.find("h2").text == "KNOWN-BAD (1)"
    shown = " ".join(node.text for node in root.walk())
    assert "subjects" not in shown and '[["env"' not in shown and not root.find_all("section", "extra")


def test_a_known_bad_state_most_hosts_hold_names_the_ones_spared() -> None:
    root = parse(with_headlines(5, {n: p2p_disabled for n in (1, 2, 4, 5)}))
    assert states(root) == [("nccl-p2p-disabled", "every host but gpu03 (4 of 5)")]
    root = parse(with_headlines(5, {2: p2p_disabled}))
    assert states(root) == [("nccl-p2p-disabled", "gpu02")]


def test_build_ids_are_shortened_as_diff_shows_them() -> None:
    one, other = "a7f4c0de" * 5, "c0db1e55" * 5

    def libraries(build: str) -> Edit:
        def edit(facts: Facts) -> None:
            lib = "/srv/venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2"
            facts["libraries"] = {
                "files": {lib: {"size": 1, "mtime": 1.0, "build_id": build, "soname": "libnccl.so.2", "error": None,
                                "owners": {"nvidia-nccl-cu12": "2.27.3"}}},
                "servers": {}, "servers_error": None, "interpreters": {"python3": {"libraries": [lib], "error": None}},
                "system": [], "integrity": {}, "truncated": False,
            }
        return edit

    root = parse(with_headlines(3, {1: libraries(one), 2: libraries(one), 3: libraries(other)}))
    [cell] = cells(root, "outlier").values()
    assert cell.text == "c0db1e55…" and cell.attrs["title"].endswith("c0db1e55… here, majority a7f4c0de… (2 of 3 hosts)")
    page = " ".join([node.text for node in root.walk()] + [node.attrs.get("title", "") for node in root.walk()])
    assert one not in page and other not in page
