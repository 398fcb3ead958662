"""Parse what probe shell scripts print: ``@@key value`` lines, or ``@@name`` sections.

Shell probes print one fact per line as ``@@key value`` (or a ``@@name`` line followed by
a command's whole output) so that one remote script can return many facts in one round
trip; anything before the first marker is ignored.
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


def split_sections(text: str) -> dict[str, str]:
    """``@@name`` headed sections of the shell script's output."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("@@"):
            current = sections.setdefault(line[2:].strip(), [])
        elif current is not None:
            current.append(line)
    return {name: "\n".join(lines) for name, lines in sections.items()}
