"""The three HTML reports in a real headless Chromium, loaded over file://: they render
without a console message, the outlier cells are where they should be, a host's
``<script>`` in a package name or a file name shows as text and never runs, and nothing
scrolls sideways on a 1400-pixel screen, however many facts differ and however long."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from driftwatch.diff import DiffOptions
from driftwatch.explain import diff_snapshots
from driftwatch.fleet import compare_fleet
from driftwatch.fleet.headline import headline_facts
from driftwatch.report.html.diff import render_diff
from driftwatch.report.html.fleet import render_fleet
from driftwatch.report.html.history import render_history
from tests.diff.builders import SRT, baseline, dist, dists, make_snapshot
from tests.fleet.builders import host_facts
from tests.report.html.browser import Loaded, chromium, load, sideways
from tests.report.html.hostile import (
    ALERT, FILE, MARKER, OUTLIERS, PACKAGE, hostile_diff, hostile_fleet, hostile_history,
)

PAGES: dict[str, tuple[str, Callable[[], str]]] = {
    "diff": ("driftwatch diff", lambda: render_diff(hostile_diff())),
    "fleet": ("driftwatch fleet", lambda: render_fleet(*hostile_fleet())),
    "history": ("driftwatch history", lambda: render_history(hostile_history())),
}


@pytest.fixture(scope="module")
def browser() -> str:
    return chromium()


@pytest.fixture(scope="module")
def loaded(browser: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Loaded]:
    folder = tmp_path_factory.mktemp("html-reports")
    pages = {}
    for name, (_, page) in PAGES.items():
        path = folder / f"{name}.html"
        path.write_text(page(), encoding="utf-8")
        pages[name] = load(browser, path)
    return pages


def test_the_harness_sees_a_script_that_runs_and_what_it_logs(browser: str, tmp_path: Path) -> None:
    """So that 'never runs' and 'no console message' below are checked, not assumed."""
    page = tmp_path / "control.html"
    page.write_text(
        f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>control</title></head><body><p>{PACKAGE}</p>'
        '<script>console.error("seen by the harness")</script></body></html>'
    )
    got = load(browser, page)
    assert got.title == MARKER
    assert any("seen by the harness" in line for line in got.console), got.console


@pytest.mark.parametrize("name", sorted(PAGES))
def test_renders_without_a_console_message(loaded: dict[str, Loaded], name: str) -> None:
    page = loaded[name]
    assert page.console == []
    assert page.dom.find("h1").text == PAGES[name][0]
    assert page.dom.find("p", "headline").text


@pytest.mark.parametrize("name", sorted(PAGES))
def test_a_hosts_script_shows_as_text_and_never_runs(loaded: dict[str, Loaded], name: str) -> None:
    page = loaded[name]
    assert MARKER not in page.title and page.title.startswith(PAGES[name][0])
    assert not page.dom.find_all("script") and not page.dom.find_all("img")
    shown = [node.text for node in page.dom.walk()]
    assert PACKAGE in shown and ALERT in shown and FILE in shown


def test_the_outlier_cells_are_where_they_should_be(loaded: dict[str, Loaded]) -> None:
    tables = loaded["fleet"].dom.find_all("table", "matrix")
    marked = {(td.attrs["data-host"], td.attrs["data-fact"]): td for t in tables for td in t.find_all("td", "outlier")}
    assert set(marked) == OUTLIERS
    assert marked["gpu02", "nccl"].attrs["title"] == "nvidia-nccl-cu12: 2.21.5 here, majority 2.27.3 (4 of 5 hosts)"
    # Each marked cell sits in its host's row, under its fact's column, in every table of the matrix.
    for matrix in tables:
        header = [th.attrs.get("data-fact") for th in matrix.find("thead").find_all("th")]
        for row in matrix.find("tbody").find_all("tr"):
            for position, cell in enumerate(row.find_all("td"), start=1):
                assert cell.attrs["data-fact"] == header[position] and cell.attrs["data-host"] == row.attrs["data-host"]


def wide_fleet() -> str:
    """Eight hosts with long names; one holds 30 packages at other versions and a file with
    a long path: 40-odd columns of long values."""
    snapshots = {}
    for n in range(1, 9):
        facts = host_facts(n)
        for i in range(30):
            version = f"1.{i}.0" if n != 3 else f"1.{i}.0.post{'9' * 40}+local.build.{n}"
            dists(facts)[f"some-long-package-name-{i:02d}"] = dist(f"some-long-package-name-{i:02d}", version)
        if n == 3:
            facts["files"]["files"][f"{SRT}/{'deeply/' * 20}nested_module.py"] = {
                "size": 3, "mtime": 1.0, "mode": "0644", "sha256": "b" * 64, "error": None}
        snapshots[f"gpu-node-{n:03d}.rack7.cluster.example.com"] = make_snapshot(host=f"gpu{n:02d}", minutes=n, **facts)
    return render_fleet(compare_fleet(snapshots, DiffOptions()), {h: headline_facts(s) for h, s in snapshots.items()})


def wide_diff() -> str:
    facts = baseline()
    dists(facts)["sgl-kernel"]["version"] = "0.3.17" + "x" * 400  # one unbroken 400-character value
    facts["files"]["files"][f"{SRT}/{'a_very_long_directory_name/' * 12}x.py"] = {
        "size": 3, "mtime": 1.0, "mode": "0644", "sha256": "c" * 64, "error": None}
    return render_diff(diff_snapshots(make_snapshot(), make_snapshot(minutes=60, **facts), options=DiffOptions()))


WIDE: dict[str, Callable[[], str]] = {**{name: page for name, (_, page) in PAGES.items()}, "wide-fleet": wide_fleet,
                                      "wide-diff": wide_diff}


def test_the_harness_sees_a_page_that_scrolls_sideways(browser: str, tmp_path: Path) -> None:
    """So that 'nothing scrolls sideways' below is measured, not assumed."""
    wide = '<!DOCTYPE html><html><head><title>w</title></head><body><div style="width: 1800px">x</div></body></html>'
    boxed = wide.replace('<div style="width: 1800px">x</div>',
                         '<div class="wrap" style="overflow-x: auto"><div style="width: 1800px">x</div></div>')
    assert [found.split()[0] for found in sideways(browser, wide, tmp_path, "wide", 1400)] == ["page"]
    assert [found.split()[0] for found in sideways(browser, boxed, tmp_path, "boxed", 1400)] == ["div.wrap"]


@pytest.mark.parametrize("name", sorted(WIDE))
def test_no_page_scrolls_sideways_at_1400_pixels(browser: str, tmp_path: Path, name: str) -> None:
    assert sideways(browser, WIDE[name](), tmp_path, name, 1400) == []
