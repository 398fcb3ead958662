"""Text from a host is bytes first: make it text any JSON encoder and terminal can take.

Paths and names read on a target come back with undecodable bytes as lone surrogates
(``os.fsdecode``'s surrogateescape, or ``\\udcff`` escapes in a report's JSON). A snapshot
holding one cannot be stored or printed (UTF-8 has no surrogates), so each such byte is
written as ``\\xNN`` — the name stays readable and distinct.
"""

from __future__ import annotations


def valid_text(text: str) -> str:
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        raw = text.encode("utf-8", "surrogateescape") if _escaped_bytes_only(text) else None
        if raw is not None:
            return raw.decode("utf-8", "backslashreplace")
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _escaped_bytes_only(text: str) -> bool:
    """Every surrogate is a smuggled byte (U+DC80..U+DCFF), so the bytes can be restored."""
    return all(not 0xD800 <= ord(c) <= 0xDFFF or 0xDC80 <= ord(c) <= 0xDCFF for c in text)
