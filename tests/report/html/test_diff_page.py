"""`diff --html`: the terminal report's groups (what broke first), each change with its
severity colour, old and new value (the one that is the regression marked), explanation
and why it is accepted or ignored; the known-bad states in words."""

from __future__ import annotations

import dataclasses
from typing import Any

from driftwatch.diff.change import Change, Severity, Waiver
from driftwatch.explain import diff_snapshots
from driftwatch.explain.result import DiffResult
from driftwatch.report.diff import groups, headline
from driftwatch.report.html.diff import render_diff
from tests.diff.builders import SRT, T0, diff_after, dists, make_snapshot
from tests.explain import test_symptoms as symptoms
from tests.explain.test_known_bad import good
from tests.report.html.dom import Node, parse

ARGS = f"{SRT}/server_args.py"


def incident(facts: dict[str, Any]) -> None:
    facts["gpu"]["driver_version"] = "610.1"  # critical
    dists(facts)["sgl-kernel"]["version"] = "0.3.17"  # high
    dists(facts)["numpy"]["version"] = "2.1.4"  # low, accepted below
    dists(facts)["requests"]["version"] = "2.32.4"  # low, ignored below
    facts["files"]["files"][ARGS]["mtime"] = 1772028120.0  # touched, content identical: context


def waived(result: DiffResult) -> DiffResult:
    accepted = Waiver("accepted", "numpy rollout", by="ops@bastion", at=T0)
    ignored = Waiver("ignored", "requests is noise", rule="[[ignore]] #1 (package requests)")
    by_item = {"numpy": accepted, "requests": ignored}
    changes = [dataclasses.replace(c, waiver=by_item.get(c.item)) for c in result.changes]
    return DiffResult(changes, result.summary)


COLUMNS = {"severity", "category", "item", "old", "new", "why"}


def titles(root: Node) -> list[str]:
    return [n.find("h2").text for n in root.find_all("section", "group")]


def rows(root: Node) -> dict[str, Node]:
    return {r.find("td", "item").text: r for r in root.find_all("tr", "change")}


def test_grouped_as_the_terminal_report_is() -> None:
    result = waived(diff_after(incident))
    root = parse(render_diff(result))
    assert titles(root) == [
        "CRITICAL (1)", "HIGH (1)", "ACCEPTED: known, not drift (1)", "CONTEXT: changes nothing that runs (1)",
    ]
    assert [s.attrs["class"] for s in root.find_all("section", "group")] == [
        "group tone-critical", "group tone-high", "group tone-accepted", "group tone-context",
    ]
    assert root.find("p", "note-line").text == "1 ignored: package requests (--all shows them)"
    assert root.find("p", "headline").text == headline(result)  # the terminal report's first line
    assert root.find("p", "sub").text == "gpu01 2026-02-19 10:00:00 → gpu01 2026-02-19 11:00:00"


def test_each_change_with_old_new_and_why() -> None:
    row = rows(parse(render_diff(waived(diff_after(incident)))))["sgl-kernel"]
    cells = {name: td.text.strip() for td in row.find_all("td") for name in td.classes & COLUMNS}
    assert cells["old"] == "0.3.16.post4" and cells["new"] == "0.3.17"
    assert cells["category"] == "package"
    assert "sgl-kernel 0.3.16.post4 → 0.3.17" in cells["why"]
    assert row.attrs["class"] == "change tone-high" and row.find("span", "badge").text == "high"


def test_accepted_and_ignored_say_by_whom_and_why() -> None:
    found = rows(parse(render_diff(waived(diff_after(incident)), show_ignored=True)))
    assert found["numpy"].find("div", "note").text == "accepted by ops@bastion 2026-02-19 10:00 UTC: numpy rollout"
    assert found["requests"].find("div", "note").text == "ignored by [[ignore]] #1 (package requests): requests is noise"
    assert found["requests"].attrs["class"] == "change tone-ignored"


def test_a_change_that_counts_again_says_why_in_bold() -> None:
    def lapse(result: DiffResult) -> DiffResult:
        changes = [dataclasses.replace(c, lapsed="acceptance expired 2026-02-20 10:00 UTC") if c.item == "numpy" else c
                   for c in result.changes]
        return DiffResult(changes, result.summary)

    note = rows(parse(render_diff(lapse(diff_after(incident)))))["numpy"].find("div", "note")
    assert note.attrs["class"] == "note lapsed" and note.text == "acceptance expired 2026-02-20 10:00 UTC"


def test_no_drift_says_so() -> None:
    root = parse(render_diff(diff_after(lambda facts: None)))
    assert root.find("p", "headline").text == "no drift" and not root.find_all("section", "group")


@dataclasses.dataclass(frozen=True, slots=True)
class RuledChange(Change):
    """A change with a field this page has no column for (as the doctor branch adds)."""

    fix: str = ""

    def to_json(self) -> dict[str, Any]:
        return {**Change.to_json(self), "fix": self.fix}


class RuledResult(DiffResult):
    def to_json(self) -> dict[str, Any]:
        return {**DiffResult.to_json(self), "rollouts": [{"rule": "nccl-mismatch", "why": "torch pins <2.28>"}]}


def test_fields_a_later_feature_adds_are_shown_not_dropped() -> None:
    base = diff_after(incident)
    changes: list[Change] = [RuledChange(**{f.name: getattr(c, f.name) for f in dataclasses.fields(Change)}, fix="pip install x")
               for c in base.changes]
    root = parse(render_diff(RuledResult(changes, base.summary)))
    extra = rows(root)["sgl-kernel"].find("dl", "extra")
    assert [n.text for n in extra.find_all("dt")] == ["fix"] and extra.find("dd").text == "pip install x"
    section = root.find("section", "extra")
    assert section.find("h2").text == "Rollouts"
    assert [th.text for th in section.find_all("th")] == ["rule", "why"]
    assert [td.text for td in section.find_all("td")] == ["nccl-mismatch", "torch pins <2.28>"]


def p2p_disabled() -> DiffResult:
    old = good()
    new = good()
    new["processes"]["servers"]["sglang.launch_server"]["env"]["NCCL_P2P_DISABLE"] = "1"
    return diff_snapshots(make_snapshot(**old), make_snapshot(minutes=60, **new))


def test_a_known_bad_state_reads_as_words_without_the_rules_internal_keys() -> None:
    root = parse(render_diff(p2p_disabled()))
    [section] = root.find_all("section", "states")
    assert section.find("h2").text == "KNOWN-BAD: new since the old snapshot (1)"
    assert [th.text for th in section.find_all("th")] == ["severity", "known-bad state", "made by", "fix"]
    [row] = section.find_all("tr", "state")
    assert row.find("span", "rule").text == "nccl-p2p-disabled"
    assert row.find("td", "why").text.startswith("nccl-p2p-disabled (predicted): NCCL_P2P_DISABLE=1 (server sglang.launch_server)")
    assert row.find("td", "where").text == "env NCCL_P2P_DISABLE"  # the change that made it, as the report names it
    assert row.find("div", "reference").text.startswith("https://docs.nvidia.com/")
    shown = " ".join(node.text for node in root.walk())
    assert "subjects" not in shown and '[["env"' not in shown and not root.find_all("section", "extra")


def sides_marked(result: DiffResult) -> dict[str, tuple[set[str], set[str]]]:
    """item → (the old cell's marks, the new cell's marks): "worse" and "better"."""
    marks = {"worse", "better"}
    return {item: (row.find("td", "old").classes & marks, row.find("td", "new").classes & marks)
            for item, row in rows(parse(render_diff(result))).items()}


def test_the_value_that_is_the_regression_is_marked_whichever_side_it_is() -> None:
    def edits(facts: dict[str, Any]) -> None:
        gpus = list(facts["gpu"]["gpus"].values())
        gpus[0]["power_limit_w"] = 500.0  # a lower cap: the new value is the regression
        gpus[1]["power_limit_w"] = 800.0  # a higher cap: no regression either way
        facts["system"]["shm_bytes"] = 64 << 20  # a smaller /dev/shm
        dists(facts)["numpy"]["version"] = "2.1.4"  # a small step
        facts["files"]["files"][ARGS]["mtime"] = 1772028120.0  # context: nothing runs differently

    marked = sides_marked(diff_after(edits))
    assert marked["GPU 0 (H200, 00000000:83:00.0)"] == ({"better"}, {"worse"})
    assert marked["/dev/shm"] == ({"better"}, {"worse"})
    assert marked["GPU 1 (H200, 00000000:84:00.0)"] == marked["numpy"] == marked[ARGS] == (set(), set())
    assert sides_marked(p2p_disabled())["NCCL_P2P_DISABLE"] == ({"better"}, {"worse"})  # the known-bad state's


def test_the_change_that_ended_a_known_bad_state_marks_the_old_value() -> None:
    bad = good()
    bad["processes"]["servers"]["sglang.launch_server"]["env"]["NCCL_P2P_DISABLE"] = "1"
    result = diff_snapshots(make_snapshot(**bad), make_snapshot(minutes=60, **good()))  # the fix, diffed
    [removed] = [c for c in result.changes if c.item == "NCCL_P2P_DISABLE"]
    assert removed.drift and removed.severity.rank >= Severity.medium.rank  # severe on its own, yet the cure
    assert sides_marked(result)["NCCL_P2P_DISABLE"] == ({"worse"}, {"better"})


def test_what_broke_heads_the_page_as_it_heads_the_terminal_report() -> None:
    new = symptoms.good()
    symptoms.decoys(new)
    dists(new)["nvidia-nvjitlink-cu12"]["version"] = "12.1.105"
    symptoms.broke(new, symptoms.NVJITLINK)
    result = diff_snapshots(make_snapshot(**symptoms.good()), make_snapshot(minutes=60, **new))
    root = parse(render_diff(result))
    sections = root.find_all("section", "group")
    assert titles(root) == [f"{title} ({len(members)})" for title, _, members in groups(result.changes)]
    assert sections[0].attrs["class"] == "group tone-symptom" and titles(root)[0].startswith("OBSERVED: what broke")
    assert [r.find("td", "why").text.strip().split(":")[0] for r in sections[0].find_all("tr", "change")] == [
        "new other error in /data/logs/server.log", "server sglang.launch_server is no longer running",
    ]
    assert all(r.find("td", "new").classes >= {"worse"} for r in sections[0].find_all("tr", "change"))
