"""`diff --html`: the terminal report's groups, each change with its severity colour,
old and new value, explanation and why it is accepted or ignored."""

from __future__ import annotations

import dataclasses
from typing import Any

from driftwatch.diff.change import Change, Waiver
from driftwatch.explain.result import DiffResult
from driftwatch.report.diff import headline
from driftwatch.report.html.diff import render_diff
from tests.diff.builders import SRT, T0, diff_after, dists
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
    cells = {td.attrs["class"].split()[-1]: td.text.strip() for td in row.find_all("td")}
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
        return {**DiffResult.to_json(self), "known_bad": [{"rule": "nccl-mismatch", "why": "torch pins <2.28>"}]}


def test_fields_a_later_feature_adds_are_shown_not_dropped() -> None:
    base = diff_after(incident)
    changes: list[Change] = [RuledChange(**{f.name: getattr(c, f.name) for f in dataclasses.fields(Change)}, fix="pip install x")
               for c in base.changes]
    root = parse(render_diff(RuledResult(changes, base.summary)))
    extra = rows(root)["sgl-kernel"].find("dl", "extra")
    assert [n.text for n in extra.find_all("dt")] == ["fix"] and extra.find("dd").text == "pip install x"
    section = root.find("section", "extra")
    assert section.find("h2").text == "Known bad"
    assert [th.text for th in section.find_all("th")] == ["rule", "why"]
    assert [td.text for td in section.find_all("td")] == ["nccl-mismatch", "torch pins <2.28>"]
