"""Small formatters shared by the explanation rules (plain text; escaping is the renderer's)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

MAX_VALUE_CHARS = 80


def when(epoch: Any) -> str | None:
    """Epoch seconds as ``2026-02-25 14:02 UTC``; None for anything that is not a time."""
    if isinstance(epoch, bool) or not isinstance(epoch, (int, float)):
        return None
    try:
        return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    except (OverflowError, OSError, ValueError):
        return None


def gib(mib: float) -> str:
    return f"{mib / 1024:.1f} GiB"


def size(num_bytes: Any) -> str:
    if not isinstance(num_bytes, (int, float)) or isinstance(num_bytes, bool):
        return str(num_bytes)
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(num_bytes) >= scale:
            return f"{num_bytes / scale:.1f} {unit}"
    return f"{num_bytes} B"


def short(sha: Any, width: int = 7) -> str | None:
    return sha[:width] if isinstance(sha, str) else None


def value(v: Any) -> str:
    """A fact value for a sentence: bounded, so a huge topology or argv stays one line."""
    text = "(none)" if v is None else str(v)
    text = " ".join(text.split())
    return text if len(text) <= MAX_VALUE_CHARS else text[: MAX_VALUE_CHARS - 1] + "…"


def number(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v)


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def listing(items: list[str], limit: int = 3) -> str:
    shown = ", ".join(items[:limit])
    return shown if len(items) <= limit else f"{shown} and {len(items) - limit} more"
