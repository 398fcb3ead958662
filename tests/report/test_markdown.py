"""`--markdown` as GitHub renders it (cmarkgfm: GitHub's own fork of cmark, with its table and
strikethrough extensions): host text shows exactly as it was, never as a link, emphasis,
code or HTML, and is escaped only where Markdown would misread it, so the raw text a
person pastes or reads in a terminal stays readable (``pip_check/``, not ``pip\\_check/``)."""

from __future__ import annotations

import html
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from driftwatch.report.diff import md_cell, md_text
from driftwatch.report.safe import clean

cmarkgfm = pytest.importorskip("cmarkgfm", reason="the Markdown checks render with cmarkgfm (pip install cmarkgfm)")


def rendered(markdown: str) -> str:
    return str(cmarkgfm.markdown_to_html_with_extensions(markdown, extensions=["table", "strikethrough"]))


def paragraph_text(markdown: str) -> str:
    """The one paragraph's content; any markup inside it (em, del, a, code, a raw tag) stays."""
    found = re.fullmatch(r"<p>(.*)</p>\n", rendered(markdown), re.S)
    assert found, rendered(markdown)
    return found.group(1)


def cell_text(cell: str) -> str:
    page = rendered(f"| a |\n|---|\n| {cell} |\n")
    found = re.search(r"<td>(.*?)</td>", page, re.S)
    assert found, page
    return found.group(1)


def as_text(inner: str) -> str:
    assert "<" not in inner, f"Markdown made markup of host text: {inner}"
    return html.unescape(inner)


# Words from real reports, each once misread or over-escaped.
@pytest.mark.parametrize(("text", "raw"), [
    ("sgl-kernel 0.3.17 (what sglang 0.5.6 requires)", "sgl-kernel 0.3.17 (what sglang 0.5.6 requires)"),
    ("https://pip.pypa.io/en/stable/cli/pip_check/", "https://pip.pypa.io/en/stable/cli/pip_check/"),
    ("NCCL_P2P_DISABLE=1 is now set", "NCCL_P2P_DISABLE=1 is now set"),
    ("repo ~/sglang and ~/vllm", "repo ~/sglang and ~/vllm"),
    ("GPU 0 (H200, 00000000:83:00.0) #1 + 2", "GPU 0 (H200, 00000000:83:00.0) #1 + 2"),
])  # fmt: skip
def test_plain_words_are_not_escaped(text: str, raw: str) -> None:
    assert md_text(text) == raw and md_cell(text) == raw
    assert as_text(paragraph_text(f"x {md_text(text)}")) == f"x {text}"


@pytest.mark.parametrize("text", [
    "[bold red]x[/bold red]", "<script>alert(1)</script>", "*evil*", "_evil_", "__init__.py", "`rm -rf`",
    "~/a and b~", "~~gone~~", "1.0&lt;2 & co", "a | b", "C:\\path\\", "![img](http://x)", "<http://x>",
])  # fmt: skip
def test_what_markdown_would_misread_shows_as_typed(text: str) -> None:
    assert as_text(paragraph_text(f"x {md_text(text)}")) == f"x {text}"
    assert as_text(cell_text(md_cell(text))) == text


@pytest.mark.parametrize("text", ["# heading", "> quote", "- item", "+ item", "1. item", "2) item", "=== x"])
def test_a_line_it_starts_is_no_block(text: str) -> None:
    assert as_text(paragraph_text(md_text(text))) == text


# Characters Markdown gives a meaning to, with letters, digits and spaces between them.
SPECIAL = st.text(alphabet=st.sampled_from(list("ab1 _*~`[]()<>&#;!\\|-+=.:/x")), max_size=24)


@settings(max_examples=400, deadline=None)
@given(SPECIAL)
def test_any_text_renders_as_itself(text: str) -> None:
    shown = clean(text)
    assert as_text(paragraph_text(f"x {md_text(text)} y")) == f"x {shown} y"
    assert as_text(cell_text(md_cell(text))) == shown.strip()
