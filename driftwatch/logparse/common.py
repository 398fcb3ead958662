"""What SGLang and vLLM logs share: line prefixes, rank tags, errors, NCCL versions, runs."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

# "[2025-03-07 09:25:11 DP0 TP3 EP3] " – searched, not matched, because wrappers (olmocr's
# "2025-03-07 23:50:27,531 - __main__ - INFO - ") put their own prefix in front of it.
SGL_PREFIX = re.compile(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d((?: [A-Z][A-Za-z_]*\d+)*)\] ")
# 2026 SGLang inserts "INFO engine.py:177: " after the bracket.
LEVEL_FILE_PREFIX = re.compile(r"^(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) [\w.-]+\.py:\d+: ")
# "(VllmWorker rank=1 pid=7) INFO 03-12 03:19:03 [gpu_worker.py:227] " and older
# "INFO 01-11 05:52:49 api_server.py:727] "; newest builds may drop the time.
VLLM_PREFIX = re.compile(
    r"(?:\((?P<proc>[^()]*)\) )?(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) "
    r"(?:\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? )?\[?[\w./-]+\.py:\d+\] "
)
_PARALLEL_TAG = re.compile(r"(?:DP|PP|TP|EP)\d+(?:_(?:DP|PP|TP|EP)\d+)*")
_WORKER_RANK = re.compile(r"\brank=(\d+)")
_EXC_CLASS = re.compile(r"[A-Za-z_][\w.]*(?:Error|Exception): ")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_NCCL_VERSION = re.compile(r"NCCL version (\d+\.\d+\.\d+(?:\+cuda[\d.]+)?)|is using nccl==(\d+\.\d+\.\d+)")

MAX_MESSAGE = 300
MAX_DISTINCT_ERRORS = 50
Rule = tuple[str, tuple[str, ...], "re.Pattern[str]"]

# Errors every GPU server log can carry; each parser puts its own rules in front.
COMMON_RULES: list[Rule] = [
    ("tp_memory_imbalance", ("unbalanced",), re.compile(r"The memory capacity is unbalanced")),
    ("cuda_oom", ("out of memory", "OutOfMemoryError"), re.compile(r"CUDA out of memory|OutOfMemoryError|CUDA error: out of memory")),
    ("nccl_error", ("nccl", "NCCL"), re.compile(r"\bnccl(?:Internal|UnhandledCuda|System|Remote)Error\b|\bncclInvalid(?:Argument|Usage)\b|NCCL error")),
    ("nccl_timeout", ("Watchdog",), re.compile(r"Watchdog caught collective operation timeout")),
]


def split_sglang(line: str) -> tuple[str, str]:
    """(rank tag, message): "TP0", "DP0 TP3 EP3", or "main" for the main process / no prefix."""
    match = SGL_PREFIX.search(line) if "[" in line else None
    rank, message = ("main", line) if match is None else (match.group(1).strip() or "main", line[match.end():])
    return rank, LEVEL_FILE_PREFIX.sub("", message, count=1)


def split_vllm(line: str) -> tuple[str, str]:
    """(rank, message): "TP1" / "rank1" for worker processes, "main" otherwise."""
    match = VLLM_PREFIX.search(line) if ".py:" in line else None
    if match is None:
        return "main", line
    proc = match.group("proc") or ""
    tag = _PARALLEL_TAG.search(proc)
    worker = _WORKER_RANK.search(proc)
    rank = tag.group(0) if tag else (f"rank{worker.group(1)}" if worker else "main")
    return rank, line[match.end():]


def clean_message(line: str, at: int) -> str:
    """One line for an error: from the exception class before ``at`` when there is one."""
    starts = [m.start() for m in _EXC_CLASS.finditer(line, 0, at + 1) if m.start() <= at]
    if starts:
        text = line[starts[-1]:]
    else:
        text = split_sglang(line)[1]
        match = VLLM_PREFIX.search(text) if ".py:" in text else None
        text = text[match.end():] if match else text
    return _CONTROL.sub("", text).strip()[:MAX_MESSAGE]


def to_number(text: str) -> float | int | None:
    """"1,007,952" → 1007952 (a count stays an int); "21.70" → 21.7; None for garbage.

    A hostile or corrupt line can hold 5000 digits: int() refuses those and float()
    makes them inf, which JSON cannot hold.
    """
    text = text.replace(",", "")
    try:
        value = int(text) if text.lstrip("-").isdigit() else float(text)
    except ValueError:
        return None
    return value if isinstance(value, int) or math.isfinite(value) else None


def to_float(text: str) -> float | None:
    value = to_number(text)
    return None if value is None else float(value)


@dataclass
class LogFacts:
    """Facts of the latest server run in a log; a new argument line after progress starts a new run."""

    kind: str
    rules: list[Rule]
    server_args: dict[str, Any] = field(default_factory=dict)
    args_form: str | None = None
    args_truncated: bool = False
    memory: dict[str, dict[str, float]] = field(default_factory=dict)
    ready: bool = False
    errors: dict[tuple[str, str], int] = field(default_factory=dict)
    nccl: set[str] = field(default_factory=set)
    extra: dict[str, Any] = field(default_factory=dict)
    runs: int = 0
    _words: re.Pattern[str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        # One C-level search per line instead of a dozen Python-level "in" tests: most
        # lines of a big log carry none of the words.
        words = {word for _, keywords, _ in self.rules for word in keywords} | {"nccl", "NCCL version"}
        self._words = re.compile("|".join(re.escape(word) for word in sorted(words)))

    def start_args(self, args: dict[str, Any], form: str, truncated: bool) -> None:
        # A server restarted into the same file prints its arguments again: what the log
        # says about memory, errors and readiness must then be about the new run only.
        # A repeated line before any progress is the same start-up, not a new run.
        progressed = bool(self.memory or self.ready or self.errors)
        if progressed or not self.server_args:
            self.runs += 1
        if progressed:
            self.memory, self.ready, self.errors = {}, False, {}
        self.server_args, self.args_form, self.args_truncated = args, form, truncated

    def mem(self, rank: str, **values: float) -> None:
        self.memory.setdefault(rank, {}).update(values)

    def add_error(self, kind: str, message: str, count: int = 1) -> None:
        key = (kind, message)
        if key in self.errors or len(self.errors) < MAX_DISTINCT_ERRORS:
            self.errors[key] = self.errors.get(key, 0) + count

    def scan_common(self, line: str) -> bool:
        """Errors, NCCL versions and readiness; True when the line was one of them."""
        if not self._words.search(line):
            return False
        if "nccl" in line or "NCCL version" in line:  # also inside NCCL error messages
            for found in _NCCL_VERSION.finditer(line):
                self.nccl.add(found.group(1) or found.group(2))
        for kind, keywords, pattern in self.rules:
            if any(word in line for word in keywords):
                match = pattern.search(line)
                if match:
                    self.add_error(kind, clean_message(line, match.start()))
                    return True
        return False

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "server_args": self.server_args,
            "server_args_form": self.args_form,
            "server_args_truncated": self.args_truncated,
            **self.extra,
            "memory": self.memory,
            "ready": self.ready,
            "nccl_versions": sorted(self.nccl),
            "errors": [{"kind": k, "message": m, "count": c} for (k, m), c in self.errors.items()],
            "runs": self.runs,
        }
