"""One self-contained HTML page from a template: inline CSS, no script, no external asset.

Text from hosts is data. Two layers keep it so:

- every ``{{ … }}`` goes through ``clean`` (control characters, bidi overrides shown as
  escapes) and then Jinja2's autoescape (``& < > " '``), so a package named
  ``<script>…</script>`` or a file named ``x"</td>`` is text in a cell or an attribute;
  nothing in this package ever marks host text as ``Markup``;
- the page's Content-Security-Policy allows inline styles and nothing else: were a
  script ever to slip through, the browser would refuse to run it, and no page fetches
  anything (it opens the same from an email attachment, offline).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from driftwatch import __version__
from driftwatch.model import utcnow
from driftwatch.report.safe import clean
from driftwatch.rules.finding import Finding

MAX_VALUE_CHARS = 600  # a cell stays readable; the JSON form has every value whole


def _finalize(value: Any) -> Any:
    if isinstance(value, Markup):  # a macro's or a block's output: already escaped by Jinja
        return value
    return "" if value is None else clean(value)


@functools.cache
def environment() -> Environment:
    return Environment(
        loader=PackageLoader("driftwatch.report.html", "templates"),
        autoescape=True,  # every template, whatever its name
        finalize=_finalize,
        undefined=StrictUndefined,  # a misspelt name is a bug, not an empty cell
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render(template: str, **context: Any) -> str:
    page = {"version": __version__, "generated": utcnow().strftime("%Y-%m-%d %H:%M:%S UTC")}
    return environment().get_template(template).render(page=page, **context)


def value_text(value: Any) -> str:
    """A fact value for a cell: strings as they are, structures as compact JSON, bounded."""
    if value is None:
        return "absent"
    if isinstance(value, str):
        text = value
    elif isinstance(value, bool | int | float):
        text = json.dumps(value)
    else:
        text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= MAX_VALUE_CHARS else text[: MAX_VALUE_CHARS - 1] + "…"


@dataclass(frozen=True)
class StateRow:
    """A known-bad state as a person reads it: the rule's internal keys (its subjects, its
    key) stay in the JSON form."""

    tone: str
    rule: str
    why: str
    evidence: str  # observed or predicted
    fix: str
    reference: str
    where: str  # the fleet's hosts that hold it, or the diff's changes that made it


def state_row(state: Finding, where: str, tone: str | None = None) -> StateRow:
    return StateRow(tone or state.severity.value, state.rule, state.why, state.evidence, state.fix, state.reference, where)


def _cell(value: Any) -> str:
    return "" if value is None else value_text(value)


@dataclass(frozen=True)
class Table:
    caption: str
    headers: list[str]
    rows: list[list[str]]


@dataclass(frozen=True)
class Extra:
    """A part of a report this page has no layout for (a field another feature added):
    shown generically rather than dropped."""

    title: str
    tables: list[Table] = field(default_factory=list)
    text: str = ""


def extra_fields(document: dict[str, Any], known: Iterable[str]) -> list[tuple[str, str]]:
    """(name, value) for the keys of ``document`` a page does not lay out, empty ones left out."""
    skip = set(known)
    return [(k.replace("_", " "), _cell(v)) for k, v in document.items() if k not in skip and v not in (None, "", [], {})]


def extra_sections(document: dict[str, Any], known: Iterable[str]) -> list[Extra]:
    skip = set(known)
    return [_extra(key, value) for key, value in document.items() if key not in skip and value not in (None, "", [], {})]


def _extra(key: str, value: Any) -> Extra:
    title = key.replace("_", " ").capitalize()  # known_bad: "Known bad"
    if _records(value):
        return Extra(title, [_table("", value)])
    if isinstance(value, dict) and all(_records(v) for v in value.values()):
        return Extra(title, [_table(str(name), rows) for name, rows in value.items()])
    if isinstance(value, dict):
        return Extra(title, [Table("", ["", ""], [[str(k), _cell(v)] for k, v in value.items()])])
    return Extra(title, text=_cell(value))


def _records(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def _table(caption: str, records: list[dict[str, Any]]) -> Table:
    headers = list(dict.fromkeys(k for record in records for k in record))
    rows = [[_cell(record.get(h)) for h in headers] for record in records]
    return Table(caption, [h.replace("_", " ") for h in headers], rows)
