"""`diff`, `fleet` and `history` with `--html FILE`: the page is written whole beside the
usual report, the exit code is the command's, and a FILE that cannot be written is one
line and exit 1."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from driftwatch.cli import main
from driftwatch.store import SnapshotStore
from tests.diff.builders import dists, make_snapshot
from tests.fleet.builders import host_facts, old_nccl
from tests.report.html.dom import Node, parse

Run = tuple[int, str, str]


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SnapshotStore:
    """gpu01..gpu04 alike but gpu03 (an older NCCL); gpu01 has a good state, then sgl-kernel moved."""
    monkeypatch.chdir(tmp_path)
    found = SnapshotStore(tmp_path / "snapshots")
    for n in range(1, 5):
        facts = host_facts(n)
        if n == 3:
            old_nccl(facts)
        if n == 1:
            found.save(make_snapshot(host="gpu01", minutes=0, **host_facts(1)).model_copy(update={"labels": ["good"]}))
            dists(facts)["sgl-kernel"]["version"] = "0.3.17"
        found.save(make_snapshot(host=f"gpu{n:02d}", minutes=60 + n, **facts))
    return found


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> Run:
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def page(path: Path) -> Node:
    return parse(path.read_text(encoding="utf-8"))


COMMANDS = {
    "diff": ["diff", "gpu01@good", "gpu01@latest"],
    # The snapshots were taken in February: not stale for this comparison (fleet's --max-age).
    "fleet": ["fleet", "gpu01", "gpu02", "gpu03", "gpu04", "--max-age", "3650d"],
    "history": ["history", "gpu01"],
}


@pytest.mark.parametrize(("name", "code"), [("diff", 2), ("fleet", 2), ("history", 0)])
def test_the_page_beside_the_same_report_and_exit_code(
    store: SnapshotStore, capsys: pytest.CaptureFixture[str], name: str, code: int
) -> None:
    plain = run(capsys, *COMMANDS[name])
    with_html = run(capsys, *COMMANDS[name], "--html", "report.html")
    assert with_html == plain and plain[0] == code
    root = page(Path("report.html"))
    assert root.find("h1").text == f"driftwatch {name}"
    assert root.find("p", "headline").text == plain[1].splitlines()[0]  # the terminal report's first line


def test_json_and_markdown_stay_alone_on_stdout(store: SnapshotStore, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, *COMMANDS["diff"], "--json", "--html", "diff.html")
    assert code == 2 and json.loads(out)["summary"]["total"] == 1
    code, out, _ = run(capsys, *COMMANDS["fleet"], "--markdown", "--html", "fleet.html")
    assert code == 2 and out.startswith("**driftwatch fleet:** 2 odd hosts out of 4: gpu01, gpu03")
    assert page(Path("diff.html")).find("td", "item").text == "sgl-kernel"
    marked = {(td.attrs["data-host"], td.attrs["data-fact"]) for td in page(Path("fleet.html")).find_all("td", "outlier")}
    assert marked == {("gpu03", "nccl"), ("gpu01", "sgl-kernel")}


def test_the_fleet_matrix_shows_every_hosts_headline_facts(store: SnapshotStore, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, *COMMANDS["fleet"], "--html", "fleet.html")[0] == 2
    rows = page(Path("fleet.html")).find("table", "matrix").find("tbody").find_all("tr")
    nccl = {row.attrs["data-host"]: next(td.text for td in row.find_all("td") if td.attrs["data-fact"] == "nccl")
            for row in rows}
    assert nccl == {"gpu01": "2.27.3", "gpu02": "2.27.3", "gpu03": "2.21.5", "gpu04": "2.27.3"}


@pytest.mark.parametrize("name", sorted(COMMANDS))
@pytest.mark.parametrize(("target", "says"), [
    ("no-such-folder/report.html", "--html no-such-folder/report.html: no folder no-such-folder"),
    (".", "--html .: is a folder"),
    ("/proc/driftwatch-report.html", "cannot write --html /proc/driftwatch-report.html:"),
])  # fmt: skip
def test_a_file_that_cannot_be_written_is_one_line(
    store: SnapshotStore, capsys: pytest.CaptureFixture[str], name: str, target: str, says: str
) -> None:
    code, out, err = run(capsys, *COMMANDS[name], "--html", target)
    assert code == 1 and out == ""
    assert err.startswith(f"driftwatch: error: {says}") and err.count("\n") == 1, err


def test_the_file_is_checked_before_the_work(store: SnapshotStore, capsys: pytest.CaptureFixture[str]) -> None:
    """A mistyped folder is said before anything is read or collected (gpu09 has no snapshot)."""
    code, _, err = run(capsys, "fleet", "gpu01", "gpu09", "--html", "no-such-folder/f.html")
    assert code == 1 and "no folder no-such-folder" in err and "gpu09" not in err


@pytest.mark.parametrize("umask", [0o000, 0o027])
def test_the_file_is_replaced_whole_and_is_0644_whatever_the_umask(
    store: SnapshotStore, capsys: pytest.CaptureFixture[str], tmp_path: Path, umask: int
) -> None:
    # Under umask 000 a report was world-writable (0666) beside a store kept 700/600.
    target = tmp_path / "out" / "report.html"
    target.parent.mkdir()
    target.write_text("an older report " * 10_000)
    old_umask = os.umask(umask)
    try:
        assert run(capsys, *COMMANDS["diff"], "--html", str(target))[0] == 2
    finally:
        os.umask(old_umask)
    text = target.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>") and text.rstrip().endswith("</html>") and "older" not in text
    assert target.stat().st_mode & 0o777 == 0o644
    assert [p.name for p in target.parent.iterdir()] == ["report.html"]  # no temp file left
