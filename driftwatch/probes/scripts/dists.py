# driftwatch target-side prelude (python >= 3.8, stdlib only), sent ahead of
# python_collect.py and cuda_collect.py as one `<python> -` script.
#
# It finds installed distributions the way importlib.metadata does -- the *.dist-info and
# *.egg-info entries of every sys.path directory, in sys.path order -- and reads their
# METADATA headers itself. Importing importlib.metadata (email, zipfile, csv, ...) costs
# ~33 ms of CPU on every interpreter start, most of what a collector run costs; these few
# functions cost under 1 ms. Not covered: distributions inside zip files on sys.path.
from __future__ import annotations

import json
import os
import re
import stat
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # for type checkers only: importing typing costs ~5 ms per start on the target
    from collections.abc import Iterator
    from typing import Any

MARKER = "driftwatch-python-report:"
_INFO_SUFFIXES = (".dist-info", ".egg-info")


def normalize(name: str) -> str:
    """PEP 503 normalized project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def drop_cwd_from_path() -> None:
    """``python -`` puts the working directory first on sys.path; the login directory of
    an SSH session is arbitrary and must not change what the interpreter "has installed"."""
    if sys.path and sys.path[0] == "":
        del sys.path[0]


# A dist-info file is read this far at most: torch's RECORD is ~2 MB, a METADATA's headers
# come before its long description.
MAX_INFO_BYTES = 16 * 1024 * 1024


def read_bytes(path: str, limit: int = MAX_INFO_BYTES) -> bytes | None:
    """The first ``limit`` bytes of a regular file; None when it is missing, unreadable or
    not a regular file (a FIFO named RECORD would block the read forever)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks, left = [], limit
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def read_text(path: str) -> str | None:
    data = read_bytes(path)
    return None if data is None else data.decode("utf-8", "replace")


def distribution_paths(entries: list[str] | None = None) -> Iterator[str]:
    """Every ``*.dist-info`` / ``*.egg-info`` (directory or file) and ``*.egg/EGG-INFO``,
    directory by directory in sys.path order, by name within a directory."""
    for entry in sys.path if entries is None else entries:
        try:
            names = sorted(os.listdir(entry or "."))
        except OSError:  # missing, not a directory, a zip file
            continue
        for name in names:
            if name.lower().endswith(_INFO_SUFFIXES):
                yield os.path.join(entry, name)
        if entry.lower().endswith(".egg") and "EGG-INFO" in names:
            yield os.path.join(entry, "EGG-INFO")


def metadata_headers(path: str) -> dict[str, list[str]] | None:
    """The core metadata headers of one distribution as {lower-case name: [values]}, or
    None when it has none: METADATA (wheels), PKG-INFO (egg-info directory), or the
    ``.egg-info`` file itself. Parsing stops at the first blank line (the description)."""
    text = read_text(os.path.join(path, "METADATA")) or read_text(os.path.join(path, "PKG-INFO"))
    if text is None and os.path.isfile(path):
        text = read_text(path)
    if not text:
        return None
    headers: dict[str, list[str]] = {}
    last: list[str] | None = None
    for line in text.splitlines():
        if not line.strip():
            break
        if line[0] in " \t" and last is not None:  # folded continuation of the last header
            last[-1] += "\n" + line
            continue
        key, sep, value = line.partition(":")
        if not sep:
            break
        last = headers.setdefault(key.strip().lower(), [])
        last.append(value.strip())
    return headers


def first(headers: dict[str, list[str]], key: str) -> str | None:
    """The first value of a header (``key`` in lower case), as email's ``get`` gives it."""
    values = headers.get(key)
    return values[0] if values else None


def egg_requires(path: str) -> list[str] | None:
    """``requires.txt`` of an egg-info as Requires-Dist strings, converted the way
    importlib.metadata does (``[extra:marker]`` sections become markers); None if absent."""
    text = read_text(os.path.join(path, "requires.txt"))
    if not text:
        return None
    requires: list[str] = []
    section = ""
    for line in (raw.strip() for raw in text.splitlines()):
        if not line:
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line.strip("[]")
            continue
        extra, _, markers = section.partition(":")
        if extra and markers:
            markers = "(" + markers + ")"
        conditions = [c for c in (markers, extra and 'extra == "' + extra + '"') if c]
        if conditions:  # PEP 508: a URL requirement needs a space before its marker
            line += (" " if "@" in line else "") + "; " + " and ".join(conditions)
        requires.append(line)
    return requires


def emit(report: dict[str, Any]) -> None:
    """Print ``MARKER + JSON`` last on stdout, on a line of its own; the marker lets the
    reader skip anything a ``.pth`` file or sitecustomize printed first."""
    text = json.dumps(report, ensure_ascii=False, sort_keys=True)
    # Undecodable file names arrive as lone surrogates: hand their raw bytes back and let
    # the reader's lenient decoding replace them, instead of crashing on stdout's codec.
    try:
        data = (MARKER + text + "\n").encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        data = (MARKER + json.dumps(report, sort_keys=True) + "\n").encode("ascii")
    sys.stdout.flush()
    sys.stdout.buffer.write(b"\n" + data)
    sys.stdout.buffer.flush()
