"""The three HTML reports in a real headless Chromium, loaded over file://: they render
without a console message, the outlier cells are where they should be, and a host's
``<script>`` in a package name or a file name shows as text and never runs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from driftwatch.report.html.diff import render_diff
from driftwatch.report.html.fleet import render_fleet
from driftwatch.report.html.history import render_history
from tests.report.html.browser import Loaded, chromium, load
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
    matrix = loaded["fleet"].dom.find("table", "matrix")
    marked = {(td.attrs["data-host"], td.attrs["data-fact"]): td for td in matrix.find_all("td", "outlier")}
    assert set(marked) == OUTLIERS
    assert marked["gpu02", "nccl"].attrs["title"] == "nvidia-nccl-cu12: 2.21.5 here, majority 2.27.3 (4 of 5 hosts)"
    # Each marked cell sits in its host's row, under its fact's column.
    header = [th.attrs.get("data-fact") for th in matrix.find("thead").find_all("th")]
    for row in matrix.find("tbody").find_all("tr"):
        for position, cell in enumerate(row.find_all("td"), start=1):
            assert cell.attrs["data-fact"] == header[position] and cell.attrs["data-host"] == row.attrs["data-host"]
