"""Read Python reprs that servers print (``ServerArgs(k=v, ...)``, ``{'k': v}``, ``Namespace``).

Nothing is ever evaluated: each value goes through :func:`ast.literal_eval` on its own, so
one value that is not a literal (an object repr) or a line cut short by a log shipper
costs that one value, not the whole line.
"""

from __future__ import annotations

import ast
import json
import math
import re
import warnings
from typing import Any

# A ServerArgs repr is ~10-20 KB; anything far longer is not one (e.g. a binary blob
# that happens to follow the marker), and scanning it char by char would cost seconds.
MAX_REPR_CHARS = 256 * 1024
# ServerArgs has ~300 fields in 2026; a line with far more items is not an argument line.
MAX_ITEMS = 2000

_KWARG = re.compile(r"\s*([A-Za-z_]\w*)\s*=(.*)", re.DOTALL)
_DICT_ITEM = re.compile(r"""\s*('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")\s*:(.*)""", re.DOTALL)


def scan_items(text: str) -> tuple[list[str], bool]:
    """Split the text after an opening bracket into its top-level comma-separated items.

    Returns the items and whether the matching closing bracket was found. Commas inside
    strings and nested brackets do not split.
    """
    items: list[str] = []
    depth, start, quote, i = 0, 0, "", 0
    end = min(len(text), MAX_REPR_CHARS)
    while i < end:
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            if depth == 0:
                items.append(text[start:i])
                return [item for item in items if item.strip()], True
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
            if len(items) >= MAX_ITEMS:
                return [item for item in items if item.strip()], False
        i += 1
    items.append(text[start:end])
    return [item for item in items if item.strip()], False


def json_safe(value: Any) -> Any:
    """A literal as JSON can hold it: tuples and sets become lists, odd things their repr."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, (list, tuple)):
        return [json_safe(item) for item in value]
    if isinstance(value, (set, frozenset)):
        return sorted((json_safe(item) for item in value), key=repr)
    if isinstance(value, dict):
        return {key if isinstance(key, str) else repr(key): json_safe(item) for key, item in value.items()}
    return repr(value)  # bytes, complex, Ellipsis


def literal(source: str) -> Any:
    """``ast.literal_eval`` without its warnings: a logged Windows path ('C:\\Bin') or a
    mangled line must not print a SyntaxWarning on the user's terminal."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.literal_eval(source)


def convert(source: str) -> Any:
    """One value's source text as a JSON-safe value; a non-literal keeps its text."""
    source = source.strip()
    try:
        return json_safe(literal(source))
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        pass
    try:  # a JSON-style dump (true/false/null) rather than a Python repr
        return json_safe(json.loads(source))
    except (ValueError, RecursionError):
        return source


def _collect(items: list[str], closed: bool, pattern: re.Pattern[str], literal_keys: bool) -> tuple[dict[str, Any], bool]:
    # Without the closing bracket the last item may be cut mid-value ("0.8" of "0.88"):
    # a wrong number is worse than a missing one, so it is dropped.
    truncated = not closed
    if truncated and items:
        items = items[:-1]
    result: dict[str, Any] = {}
    for item in items:
        match = pattern.match(item)
        if not match:
            continue
        try:
            key = str(literal(match.group(1))) if literal_keys else match.group(1)
        except (ValueError, SyntaxError):  # a key with a broken escape
            continue
        result[key] = convert(match.group(2))
    return result, truncated


def parse_call_kwargs(text: str) -> tuple[dict[str, Any], bool]:
    """``k=v, ...)`` (the text after ``ServerArgs(``) → (values, truncated)."""
    items, closed = scan_items(text)
    return _collect(items, closed, _KWARG, literal_keys=False)


def parse_dict_items(text: str) -> tuple[dict[str, Any], bool]:
    """``'k': v, ...}`` (the text after ``{``) → (values, truncated)."""
    items, closed = scan_items(text)
    return _collect(items, closed, _DICT_ITEM, literal_keys=True)


# vLLM's engine line drops a comma at times: "chunked_prefill_enabled=False multi_step_stream_outputs=True".
_GLUED_KWARG = re.compile(r"\s+(?=[A-Za-z_]\w{0,80}=)")
_NESTED = ("'", '"', "(", "[", "{")
MAX_LOOSE_VALUE = 1024


def parse_loose_kwargs(text: str) -> dict[str, Any]:
    """``k=v, k=v`` without brackets (vLLM's "Initializing … with config: model='…',
    dtype=torch.bfloat16, max_seq_len=8192, …"): enum values as bare words, the line's end
    is the config's end. A value longer than ``MAX_LOOSE_VALUE`` (a compilation config with
    every capture size) is left out: it is not a setting anyone compares by eye."""
    items, _ = scan_items(text.strip().removesuffix(")"))
    result: dict[str, Any] = {}
    for item in items:
        match = _KWARG.match(item)
        if not match:
            continue
        key, value = match.group(1), match.group(2).strip()
        if len(result) >= MAX_ITEMS:
            break
        if not any(ch in value for ch in _NESTED) and "=" in value:
            head, *rest = _GLUED_KWARG.split(value, maxsplit=MAX_ITEMS - len(result))
            for extra in rest[: MAX_ITEMS - len(result)]:
                more = _KWARG.match(extra)
                if more and len(more.group(2)) <= MAX_LOOSE_VALUE:
                    result[more.group(1)] = convert(more.group(2))
            value = head
        if len(value) <= MAX_LOOSE_VALUE:
            result[key] = convert(value)
    return result
