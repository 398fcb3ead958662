"""Make text from a host safe to print: no rich markup, no terminal escape sequences.

Every string that came from a target (package names, paths, process names, log lines) is
data. Control characters are shown as ``\\xNN`` so a hostile host cannot move the cursor,
retitle the terminal or hide lines; rich markup is never interpreted because reports are
built from ``rich.text.Text`` objects, and ``escape_markup`` covers the few markup strings.
"""

from __future__ import annotations

import re

from rich.markup import escape as escape_markup

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def clean(value: object) -> str:
    """A printable one-line-safe rendering of any value from a host."""
    text = value if isinstance(value, str) else str(value)
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def markup_safe(value: object) -> str:
    return escape_markup(clean(value))


__all__ = ["clean", "escape_markup", "markup_safe"]
