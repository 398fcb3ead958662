"""Parse the ``@@key value`` lines that probe shell scripts print.

Shell probes print one fact per line as ``@@key value`` so that one remote script can
return many facts in one round trip; anything else on stdout is ignored.
"""

from __future__ import annotations


def parse_sections(text: str) -> dict[str, list[str]]:
    """Map each ``@@key`` to the list of values printed for it, in order."""
    found: dict[str, list[str]] = {}
    for line in text.splitlines():
        if not line.startswith("@@"):
            continue
        key, _, value = line[2:].partition(" ")
        found.setdefault(key, []).append(value)
    return found


def first(sections: dict[str, list[str]], key: str) -> str | None:
    """The first value printed for ``key``, or None when it was empty or absent."""
    values = sections.get(key)
    return values[0] if values and values[0] != "" else None
