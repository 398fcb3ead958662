"""Which changes a pattern a user typed names. Pure; case-insensitive everywhere.

Two ways of naming, for two jobs:

- ``names_change`` (``accept HOST ITEM...``, ``[[ignore]]``): a glob on the item, or
  ``category:item`` with a glob on each side. The item is the change's identity
  (``sgl-kernel``, ``driver``, a GPU UUID, a file path) or the name a report shows for it
  (``GPU 0 (H200, 00000000:18:00.0)``). ``driver`` names the driver; ``gpu:*`` every GPU
  change; ``*nccl*`` NCCL in any form.
- ``mentions`` (``history --item``): a search. The word is found in the category or the
  item (anywhere in it: ``nccl`` finds ``nvidia-nccl-cu12``), or as a word of the
  explanation (``nccl`` finds "torch's NCCL 2.21 → 2.27" but ``git`` does not find "digit").
  A pattern with ``*``, ``?`` or ``[`` is a glob on the category, the item or one word.
"""

from __future__ import annotations

import re
from fnmatch import fnmatchcase

from driftwatch.diff.change import Change

_GLOB = re.compile(r"[*?\[]")
_WORD_SPLIT = re.compile(r"[^\w.+-]+")


def is_glob(pattern: str) -> bool:
    return _GLOB.search(pattern) is not None


def glob(pattern: str, text: str) -> bool:
    return fnmatchcase(text.lower(), pattern.lower())


def names_item(pattern: str, item: str, label: str = "") -> bool:
    return glob(pattern, item) or bool(label) and glob(pattern, label)


def names(pattern: str, category: str, item: str, label: str = "") -> bool:
    """``pattern`` is ``ITEM`` or ``CATEGORY:ITEM`` (globs); see the module doc."""
    if names_item(pattern, item, label):
        return True  # an item with a colon in it (a file path, "log: kv cache") is still whole
    wanted, sep, rest = pattern.partition(":")
    return bool(sep) and glob(wanted, category) and names_item(rest, item, label)


def names_change(pattern: str, change: Change) -> bool:
    """A known-bad state's line of its own is also named by its rule (``unmet-requirement``)."""
    return names(pattern, change.category, str(change.item), change.label) or bool(change.rule) and glob(pattern, change.rule)


def mentions(pattern: str, change: Change) -> bool:
    """``history --item``: see the module doc."""
    fields = [change.category, str(change.item), change.label]
    if is_glob(pattern):
        words = _WORD_SPLIT.split(change.explanation)
        return any(glob(pattern, text) for text in fields + words if text)
    needle = pattern.lower()
    if any(needle in text.lower() for text in fields):
        return True
    bounded = re.compile(rf"(?<![A-Za-z0-9]){re.escape(needle)}(?![A-Za-z0-9])")
    return bounded.search(change.explanation.lower()) is not None
