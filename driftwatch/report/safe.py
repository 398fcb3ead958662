"""Make text from a host safe to print: no rich markup, no terminal escape sequences.

Every string that came from a target (package names, paths, process names, log lines) is
data. Control characters are shown as ``\\xNN`` and a newline as ``\\n`` so a hostile host
cannot move the cursor, retitle the terminal, hide lines or forge a report line of its own
(a file named ``x.py\\nCRITICAL …``); Unicode's bidirectional overrides and line separators
are shown as ``\\uNNNN`` for the same reason. Rich markup is never interpreted because
reports are built from ``rich.text.Text`` objects, and ``escape_markup`` covers the few
markup strings. Chat webhooks (Slack, Mattermost) get ``&``, ``<`` and ``>`` escaped on top,
so ``<!channel>`` or ``<https://evil|Re-authenticate>`` in a version string is just text.
"""

from __future__ import annotations

import re

from rich.markup import escape as escape_markup

# C0 controls but tab, DEL, C1 controls; bidi embeddings/overrides/isolates, line/paragraph separators.
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_CHAT_SPECIAL = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}


def _shown(match: re.Match[str]) -> str:
    char = match.group()
    if char == "\n":
        return "\\n"
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def clean(value: object) -> str:
    """A printable one-line rendering of any value from a host."""
    text = value if isinstance(value, str) else str(value)
    return _CONTROL.sub(_shown, text)


def markup_safe(value: object) -> str:
    return escape_markup(clean(value))


def chat_text(value: object) -> str:
    """Text for a Slack/Mattermost message: one clean line, with ``&``, ``<``, ``>`` escaped
    as those services require (their ``<…>`` is a link, mention or ``<!channel>`` ping)."""
    return re.sub(r"[&<>]", lambda m: _CHAT_SPECIAL[m.group()], clean(value))


__all__ = ["chat_text", "clean", "escape_markup", "markup_safe"]
