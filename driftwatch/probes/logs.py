"""Server logs: the newest file per configured glob, read bounded, parsed here.

The target only finds the file and reads its head (where SGLang prints its arguments)
and its tail (where the errors are) with seek, so a multi-GB log costs a few MiB of
transfer; the parsing (``driftwatch.logparse``) runs on the collector, pure and tested.
"""

from __future__ import annotations

import json
from typing import Any

from driftwatch.probes.base import (
    Facts,
    ProbeContext,
    ProbeError,
    ProbeSkipped,
    run_target_python,
)
from driftwatch.redact import redact_facts
from driftwatch.transport import DEFAULT_MAX_OUTPUT

# Per file at most 2 MiB of head and 2 MiB of tail; with many globs the share shrinks so
# that all of it plus the JSON header stays well inside the transport's output cap.
MAX_PART = 2 * 1024 * 1024
TOTAL_BUDGET = DEFAULT_MAX_OUTPUT - 1024 * 1024
_ARG_MARKERS = ("server_args=", "args: ")




def part_size(n_patterns: int) -> int:
    return max(1, min(MAX_PART, TOTAL_BUDGET // (2 * max(1, n_patterns))))


def head_text(data: bytes, whole: bool) -> str:
    text = data.decode("utf-8", errors="replace")
    if whole or "\n" not in text:
        return text
    # The last line was cut at the read bound: "avail mem=2" of "avail mem=21.70" would
    # be a wrong number. An argument line is kept: its parser drops the cut value itself.
    body, _, last = text.rpartition("\n")
    return text if any(marker in last for marker in _ARG_MARKERS) else body


def tail_text(data: bytes) -> str:
    # data starts one byte before the tail: a newline there means no partial first line.
    if data[:1] == b"\n":
        data = data[1:]
    else:
        cut = data.find(b"\n")
        data = data[cut + 1 :] if cut >= 0 else b""
    return data.decode("utf-8", errors="replace")


def parse_logs_report(stdout: bytes) -> dict[str, Any]:
    """The script's JSON header line plus raw bytes → facts per configured glob."""
    header, _, blob = stdout.partition(b"\n")
    from driftwatch.logparse import parse_log_parts  # ~4 ms of imports: only when logs are watched

    try:
        entries = json.loads(header)["logs"]
    except (ValueError, KeyError, TypeError) as exc:
        raise ProbeError(f"unreadable logs report: {exc}") from exc
    logs: dict[str, Any] = {}
    offset = 0
    for entry in entries:
        pattern = entry["pattern"]
        if "error" in entry:
            logs[pattern] = {key: entry[key] for key in ("path", "error") if key in entry}
            continue
        head = blob[offset : offset + entry["head_len"]]
        tail = blob[offset + entry["head_len"] : offset + entry["head_len"] + entry["tail_len"]]
        offset += entry["head_len"] + entry["tail_len"]
        split = entry["tail_offset"] is not None
        facts = parse_log_parts(head_text(head, whole=not split), tail_text(tail) if split else "")
        skipped = entry["tail_offset"] + 1 - entry["head_len"] if split else 0
        # Size and mtime move with every line a live server writes: not drift.
        logs[pattern] = {
            "path": entry["path"],
            **facts,
            "volatile": {"size": entry["size"], "mtime": entry["mtime"], "skipped_bytes": max(0, skipped)},
        }
    return logs


def log_facts(ctx: ProbeContext) -> Facts:
    """The logs probe's facts, fetched once per snapshot: the models probe reads the model
    each log's server arguments name. Raises what the probe would record."""
    return ctx.shared.once(("logs",), lambda: _collect(ctx))


def _collect(ctx: ProbeContext) -> Facts:
    if not ctx.watch.logs:
        raise ProbeSkipped("no logs configured ([watch] logs)")
    part = part_size(len(ctx.watch.logs))
    request = {"patterns": ctx.watch.logs, "head": part, "tail": part}
    result = run_target_python(ctx, "logs_collect.py", json.dumps(request).encode())
    if result.exit_code != 0:
        raise ProbeError(result.error_text.splitlines()[-1] if result.error_text else "logs probe failed")
    # ServerArgs lines carry api_key and hf_token; error lines may quote tokens.
    return {"logs": redact_facts(parse_logs_report(result.stdout))}


class LogsProbe:
    name = "logs"

    def collect(self, ctx: ProbeContext) -> Facts:
        return log_facts(ctx)
