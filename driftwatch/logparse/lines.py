"""Log text as the parsers want it: one record per line, without what pasting and shipping added.

Real logs reach driftwatch (and the issues the parsers were built from) with CRLF endings,
ANSI colour codes (raw, or as a pasted ``^[[0;36m``, or as ``[0;36m`` once the escape byte
is lost), docker and docker-compose prefixes (``vllm-1  | 2025-10-14T23:59:25.360Z …``),
CI and wrapper prefixes, markdown quotes and indentation, tqdm bars redrawn with ``\\r``.
All of that is removed here, once, so that each parser sees the server's own line.

Every pattern here is anchored or linear: a hostile 1 MiB line costs one pass.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterator
from typing import Any

# A ServerArgs line is ~20 KB; nothing a parser reads is longer. A longer line (a binary
# blob, a log shipper's glued output) is cut: no value is read from past the cut.
MAX_LINE = 256 * 1024

# ESC [ … m (and other CSI finals), the same with the escape shown as "^[", or with the
# escape byte lost in a paste ("[0;36m"): only SGR colour codes are recognised bare.
_ESCAPED = re.compile(r"(?:\x1b|\^\[|#033)\[[0-9;?]{0,20}[A-Za-z]")
_BARE_SGR = re.compile(r"\[(?:\d{1,3};)*\d{1,3}m")
# What is put in front of the server's own line, outermost first; removed repeatedly.
_WRAPPERS = re.compile(
    "|".join(  # noqa: FLY002 - one alternative per line, each with its comment
        (
            r"(?:[\w.@-]{1,80} {0,40})?\| ",  # docker-compose service column "vllm-1  | ", a table cell
            r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?:Z|[+-]\d\d:?\d\d)? ",  # docker --timestamps
            r"\[\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?:Z|[+-]\d\d:?\d\d)?\] ",  # CI (buildkite)
            r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} - [\w.]{1,80} - [A-Z]{3,8} - ",  # python logging wrapper
            r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \| [A-Z]{3,8} \| \w{1,40} \| ",  # fastchat-style wrapper
            r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} \[\w{1,10}\] \(\w{1,20}\) ",  # Lemonade: "… [Error] (Process) "
            r"(?:DEFAULT|DEBUG|INFO|NOTICE|WARNING|ERROR|CRITICAL) \d{4}-\d\d-\d\dT[\d:.]{8,20}Z ",  # Cloud Logging export
            r"\[(?:INFO|WARN|ERROR) ?\] PyProcess - [\w-]{1,40}: ",  # DJL serving
            r"(?:[>▎┃] ?)+",  # markdown quote, or a quote bar pasted from a chat
            r"[ \t]+",  # markdown or terminal indentation
        )
    )
)
_MAX_WRAPPERS = 6


def unwrap(line: str) -> str:
    """The server's own line: colour codes and pasting/shipping prefixes removed."""
    if len(line) > MAX_LINE:
        line = line[:MAX_LINE]
    line = line.removesuffix("^M")  # a carriage return pasted in caret notation
    if "\x1b" in line or "^[" in line or "#033[" in line:
        line = _ESCAPED.sub("", line)
    if "m" in line and "[" in line:
        line = _BARE_SGR.sub("", line)
    for _ in range(_MAX_WRAPPERS):
        match = _WRAPPERS.match(line)
        if match is None or not match.end():
            break
        line = line[match.end():]
    return line


def split_records(line: str, start: re.Pattern[str], tags: re.Pattern[str] | None = None) -> list[str]:
    """One line holding several log records (a paste that lost its newlines, a tqdm bar with
    a record appended) as one string per record. ``start`` matches where a record begins;
    text before a record that is nothing but ``tags`` (glued process tags) stays with it."""
    cuts = [0]
    for match in start.finditer(line, 1):
        head = line[cuts[-1] : match.start()]
        if head.strip() and not (tags is not None and tags.fullmatch(head)):
            cuts.append(match.start())
    if len(cuts) == 1:
        return [line]
    cuts.append(len(line))
    return [line[a:b].strip() for a, b in itertools.pairwise(cuts) if line[a:b].strip()]


def clean_lines(text: str) -> Iterator[str]:
    """Each line of ``text`` unwrapped; CRLF, lone CR (tqdm redraws) and LF all end a line."""
    for line in text.splitlines():
        yield unwrap(line)


# A record's text broken over lines by a terminal or a paste ("log_requests=Fa" / "lse, …",
# "num_sched" / "uler_steps=1, …"): the next line holds more key=value items and starts no record.
_CONTINUATION = re.compile(r"\b[A-Za-z_]\w{0,80}=|'\w{1,80}': ")
MAX_CONTINUATIONS = 5


def parse_wrapped(
    parse: Callable[[str], tuple[dict[str, Any], bool]], body: str, lines: list[str], after: int,
    starts_record: re.Pattern[str],
) -> tuple[dict[str, Any], bool, int]:
    """``parse(body)`` of an argument line, joined with the lines that continue it while the
    repr is unfinished: (values, still truncated, lines used). One line at a time, so a value
    cut at a line end is dropped by the parser rather than read half."""
    values, truncated = parse(body)
    used = 0
    if truncated:
        for extra in lines[after : after + continuation_lines(lines, after, starts_record)]:
            body, used = body + extra, used + 1
            values, truncated = parse(body)
            if not truncated:
                break
    return values, truncated, used


def continuation_lines(lines: list[str], after: int, starts_record: re.Pattern[str]) -> int:
    """How many lines from ``lines[after]`` on continue a wrapped argument or config line."""
    used = 0
    while used < MAX_CONTINUATIONS and after + used < len(lines):
        nxt = lines[after + used]
        if not nxt or starts_record.search(nxt, 0, 300) or not _CONTINUATION.search(nxt, 0, 4096):
            break
        used += 1
    return used
