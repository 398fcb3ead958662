"""Host text in every HTML page is text: no element, attribute or character from a host
becomes markup, and control characters are shown as escapes."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from driftwatch.report.html.diff import render_diff
from driftwatch.report.html.fleet import render_fleet
from driftwatch.report.html.history import render_history
from tests.report.html.dom import Node, parse
from tests.report.html.hostile import (
    ALERT, CONTROL_SHOWN, FILE, PACKAGE, RAW_CONTROL, VERSION, hostile_diff, hostile_fleet, hostile_history,
)

PAGES: dict[str, Callable[[], str]] = {
    "diff": lambda: render_diff(hostile_diff()),
    "fleet": lambda: render_fleet(*hostile_fleet()),
    "history": lambda: render_history(hostile_history()),
}


@pytest.fixture(params=sorted(PAGES), scope="module")
def page(request: pytest.FixtureRequest) -> str:
    return PAGES[request.param]()


def texts(root: Node) -> list[str]:
    return [n.text for n in root.walk()]


def test_a_package_named_like_a_script_is_text(page: str) -> None:
    root = parse(page)
    assert not root.find_all("script"), "a <script> element in the page"
    assert PACKAGE in texts(root) and ALERT in texts(root)  # an element holds exactly the name, as typed


def test_a_file_name_cannot_close_a_cell_or_add_one(page: str) -> None:
    root = parse(page)
    assert not root.find_all("img")
    assert FILE in texts(root)
    # The file's cell is one cell: its row has the columns of its table, no forged one.
    cell = next(n for n in root.find_all("td") if n.text == FILE)
    row = next(r for r in root.find_all("tr") if cell in r.children)
    header = next(t for t in root.find_all("table") if row in t.walk()).find("thead").find_all("th")
    assert len(row.find_all("td")) + len(row.find_all("th")) == len(header)
    assert not [n for n in root.find_all("td", "outlier") if "forged" in n.text]


def test_a_version_with_an_ampersand_reads_as_typed(page: str) -> None:
    assert VERSION in texts(parse(page))
    assert "1.0<2" not in parse(page).text


def test_control_characters_are_shown_as_escapes(page: str) -> None:
    assert not set(RAW_CONTROL) & set(page)
    assert not re.search(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]", page)
    assert any(CONTROL_SHOWN in text for text in texts(parse(page)))


def test_attributes_hold_host_text_whole() -> None:
    """In the fleet matrix a file path is an attribute value (data-fact): quotes in it do
    not end the attribute."""
    root = parse(render_fleet(*hostile_fleet()))
    facts = {n.attrs["data-fact"] for n in root.find_all("th", "fact")}
    assert f"file[{FILE}]" in facts and f"python[python3].dist[{PACKAGE}]" in facts
    assert not any("onerror" in name for node in root.walk() for name in node.attrs)


def test_the_page_allows_no_script_and_fetches_nothing(page: str) -> None:
    meta = next(n for n in parse(page).find_all("meta") if n.attrs.get("http-equiv") == "Content-Security-Policy")
    assert meta.attrs["content"] == "default-src 'none'; style-src 'unsafe-inline'"
    root = parse(page)
    assert not [n.tag for n in root.walk() if {"src", "href", "style"} & set(n.attrs)]
    assert not [n.tag for n in root.walk() if n.tag in {"script", "link", "img", "iframe", "object"}]
    assert not re.search(r"url\(|@import", root.find("style").text, re.I)
