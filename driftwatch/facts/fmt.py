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


def when_pair(old: Any, new: Any) -> tuple[str | None, str | None]:
    """Two times for one sentence, as precise as it takes to tell them apart: to the second
    when the minute alone would read the same (``11:03 → 11:03`` says nothing), and to the
    millisecond or microsecond when the second would too (a copy that kept whole seconds:
    ``19:26:13.482 → 19:26:13.000``)."""
    o, n = when(old), when(new)
    if o is None or n is None or o != n:
        return o, n
    for digits in (0, 3, 6):
        o, n = _precise(old, digits), _precise(new, digits)
        if o != n:
            break
    return o, n


def _precise(epoch: Any, digits: int) -> str | None:
    try:
        moment = datetime.fromtimestamp(epoch, timezone.utc)
    except (OverflowError, OSError, ValueError, TypeError):
        return None
    fraction = "." + f"{moment.microsecond:06d}"[:digits] if digits else ""  # cut, as clocks read
    return moment.strftime("%Y-%m-%d %H:%M:%S") + fraction + " UTC"


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


def ends(v: Any, width: int = 140) -> str:
    """An error message for a sentence: its start and its end, where the specific part is
    (``ImportError: /venv/…/libtorch_cuda.so: undefined symbol: __nvJitLinkComplete_12_4, version
    libnvJitLink.so.12`` keeps the symbol and the library)."""
    text = " ".join(("(none)" if v is None else str(v)).split())
    if len(text) <= width:
        return text
    head = width // 3
    return text[:head].rstrip() + " … " + text[len(text) - (width - head - 3):].lstrip()


def number(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v)


def plural(n: int, word: str) -> str:
    """``1 host``, ``2 hosts``, ``2 compute processes``."""
    if n == 1:
        return f"{n} {word}"
    return f"{n} {word}es" if word.endswith(("s", "x", "ch", "sh")) else f"{n} {word}s"


def listing(items: list[str], limit: int = 3) -> str:
    shown = ", ".join(items[:limit])
    return shown if len(items) <= limit else f"{shown} and {len(items) - limit} more"
