"""What SGLang and vLLM logs share: line prefixes, rank tags, numbers, errors, NCCL, runs."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from driftwatch.logparse.errors import cause_rank, classify
from driftwatch.logparse.mentions import FRAME, MAX_FRAMES, mentions, merge, normalize_shm

# SGLang's "[2025-03-07 09:25:11 DP0 TP3 EP3] ", autumn 2024's time-only "[17:43:27 TP1] ",
# the "[12-27 11:24:23] " of some builds, and a first line cut mid-bracket
# ("2025-09-13 09:09:15 TP0] "). Searched, not matched: wrappers (olmocr's
# "2025-03-07 23:50:27,531 - __main__ - INFO - ") and tqdm bars can sit in front of it.
SGL_PREFIX = re.compile(
    r"(?:\[|^)(?:\d{4}-\d\d-\d\d |\d\d-\d\d )?\d\d:\d\d:\d\d(?:[.,]\d{1,6})?((?: [A-Z][A-Za-z_]{0,20}\d{1,6}){0,6})\] "
)
# Before September 2024 SGLang printed no time: "[gpu_id=0] Load weight end. …".
SGL_GPU_ID = re.compile(r"^\[gpu_id=(\d{1,4})\] ")
# 2026 SGLang inserts "INFO engine.py:177: " after the bracket.
LEVEL_FILE_PREFIX = re.compile(r"^(DEBUG|INFO|WARNING|ERROR|CRITICAL) [\w.-]{1,100}\.py:\d{1,6}: ")
# "(VllmWorker rank=1 pid=7) INFO 03-12 03:19:03 [gpu_worker.py:227] " and older
# "INFO 01-11 05:52:49 api_server.py:727] "; newest builds may drop the time.
VLLM_PREFIX = re.compile(
    r"(?:\((?P<proc>[^()]{0,200})\) )?(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) "
    r"(?:\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? )?\[?(?P<where>[\w./-]{1,200}\.py:\d{1,6})\] "
)
_PROC_TAG = re.compile(r"\(([^()]{0,200})\) ?")
# Where a record starts when several share one line; the time is required, so that a message
# quoting "INFO" is not cut.
VLLM_RECORD = re.compile(
    r"(?:\([^()]{0,200}\) )?(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[?[\w./-]{1,200}\.py:\d{1,6}\] "
)
SGL_RECORD = re.compile(r"\[(?:\d{4}-\d\d-\d\d |\d\d-\d\d )?\d\d:\d\d:\d\d(?:[.,]\d{1,6})?(?: [A-Z][A-Za-z_]{0,20}\d{1,6}){0,6}\] ")
PROC_TAGS = re.compile(r"(?:\([^()]{0,200}\) ?){1,8}")
_PARALLEL_TAG = re.compile(r"(?:DP|PP|TP|EP)\d+(?:_(?:DP|PP|TP|EP)\d+)*")
_WORKER_RANK = re.compile(r"\brank=(\d+)")
_PID = re.compile(r"\bpid=(\d+)")
_EXC_CLASS = re.compile(r"[A-Za-z_][\w.]{0,200}?(?:Error|Exception): ")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_NCCL_VERSION = re.compile(
    r"NCCL version (\d+\.\d+\.\d+(?:\+cuda[\d.]+)?)|using nccl==(\d+\.\d+\.\d+)|libnccl\.so\.(\d+\.\d+\.\d+)"
    r"|[Nn][Cc][Cc][Ll](?: version)?: (\d+\.\d+\.\d+)\b"
)
_DIGITS = re.compile(r"\d+")

MAX_MESSAGE = 300
MAX_DISTINCT_ERRORS = 50
MAX_RANKS_PER_ERROR = 64


def proc_rank(proc: str) -> str:
    """The rank a vLLM process tag names: "TP1", "DP0", "rank1", "pid=533", or "main"."""
    tag = _PARALLEL_TAG.search(proc)
    if tag:
        return tag.group(0)
    worker = _WORKER_RANK.search(proc)
    if worker:
        return f"rank{worker.group(1)}"
    pid = _PID.search(proc)
    if pid and not proc.startswith(("APIServer", "EngineCore", "AsyncLLM", "LLMEngine")):
        return f"pid={pid.group(1)}"  # a V0 worker process: its rank is not printed
    return "main"


def split_sglang(line: str) -> tuple[str | None, str, str]:
    """(rank tag, message, level): "TP0", "DP0 TP3 EP3", "gpu_id=1", "main" for a prefix
    without a tag, None for a line without any prefix (a traceback, a bench's print)."""
    match = SGL_PREFIX.search(line) if "] " in line else None
    rank: str | None
    if match is None:
        old = SGL_GPU_ID.match(line) if line.startswith("[gpu_id=") else None
        rank, message = (None, line) if old is None else (f"gpu_id={old.group(1)}", line[old.end():])
    else:
        rank, message = match.group(1).strip() or "main", line[match.end():]
    level = LEVEL_FILE_PREFIX.match(message) if message[:1] in "DIWEC" else None
    return (rank, message, "") if level is None else (rank, message[level.end():], level.group(1))


@dataclass
class VllmLine:
    rank: str  # "TP1", "rank1", "DP0", "pid=533", "main"
    message: str
    level: str  # "" when the line has no record prefix (a continuation or a bare print)
    where: str  # "core.py:708"
    proc: str  # the process tag as printed, "" when none
    glued: list[str]  # process tags of other records glued in front: "(pid=533) (pid=536) WARNING …"


def split_vllm(line: str) -> VllmLine:
    match = VLLM_PREFIX.search(line) if ".py:" in line else None
    if match is None:
        tag = _PROC_TAG.match(line) if line.startswith("(") else None
        if tag is not None:  # "(APIServer pid=1) INFO:     Application startup complete."
            return VllmLine(proc_rank(tag.group(1)), line[tag.end():], "", "", tag.group(1), [])
        return VllmLine("main", line, "", "", "", [])
    proc = match.group("proc") or ""
    # "(VllmWorkerProcess pid=536) (VllmWorkerProcess pid=532) INFO …": 536's record was cut
    # off by 532's. Tags of another kind in front ("(vLLMHttpServer pid=1) (Worker_TP1 pid=2)")
    # are a wrapper's (Ray's), not a cut-off record.
    kind = proc.split(" ", 1)[0]
    glued = [m.group(1) for m in _PROC_TAG.finditer(line, 0, match.start()) if m.group(1).split(" ", 1)[0] == kind]
    return VllmLine(proc_rank(proc), line[match.end():], match.group("level"), match.group("where"), proc, glued)


# Where an error's own words start when no exception class heads them: NCCL's "host:pid:tid
# [dev] file:line NCCL WARN …", Ray's "… ERROR worker.py:399 -- Unhandled error (…)".
_OWN_WORDS = ("NCCL WARN ", "Unhandled error (", "Possible unhandled error")


def clean_message(message: str) -> str:
    """One line for an error, from its exception class when it names one
    ("gpu01:3171:3171 [3] NCCL INFO ncclSystemError: …" → "ncclSystemError: …"), or from the
    words its tool begins with ("… NCCL WARN Error: failed to extend …" → "NCCL WARN Error: …")."""
    window = message[: MAX_MESSAGE * 2]  # a hostile line costs a window, not its length
    own = min((at for word in _OWN_WORDS if (at := window.find(word)) >= 0), default=-1)
    found = _EXC_CLASS.search(window) if own < 0 else None
    text = window[own:] if own >= 0 else window[found.start():] if found else window
    return normalize_shm(_CONTROL.sub("", text).strip())[:MAX_MESSAGE]


def to_number(text: str) -> float | int | None:
    """"1,007,952" → 1007952 (a count stays an int); "21.70" → 21.7; None for garbage.

    A hostile or corrupt line can hold 5000 digits: int() refuses those and float()
    makes them inf, which JSON cannot hold.
    """
    text = text.replace(",", "")
    if len(text) > 40:
        return None
    try:
        value = int(text) if text.lstrip("-").isdigit() else float(text)
    except ValueError:
        return None
    return value if isinstance(value, int) or math.isfinite(value) else None


def to_float(text: str) -> float | None:
    value = to_number(text)
    return None if value is None else float(value)


def rank_order(rank: str) -> tuple[int, list[int], str]:
    """Headline first: rank 0 of every group ("TP0", "DP0 TP0 EP0", "rank0"), then the
    untagged main process, then the rest in numeric order."""
    numbers = [int(n) for n in _DIGITS.findall(rank)]
    if rank == "main":
        return (2, [], rank)
    if numbers and not any(numbers) and not rank.startswith("pid="):
        worker = any(tag in rank for tag in ("TP", "rank", "gpu_id"))
        return (0 if worker else 1, numbers, rank)
    return (3, numbers, rank)


@dataclass
class LogFacts:
    """Facts of the latest server run in a log; a new argument line after progress starts a new run."""

    kind: str
    server_args: dict[str, Any] = field(default_factory=dict)
    args_form: str | None = None
    args_truncated: bool = False
    memory: dict[str, dict[str, Any]] = field(default_factory=dict)
    ready: bool = False
    engine_ready: bool = False
    errors: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)
    nccl: set[str] = field(default_factory=set)
    extra: dict[str, Any] = field(default_factory=dict)
    runs: int = 0
    # Per rank, the files of the traceback being printed (oldest frame first): what an error
    # line that follows went through (its mentions).
    frames: dict[str, list[str]] = field(default_factory=dict)

    def progressed(self) -> bool:
        return bool(self.memory or self.ready or self.engine_ready or self.errors)

    def new_run(self) -> None:
        """A server restarted into the same file: what the log says about memory, errors and
        readiness must then be about the new run only."""
        self.runs += 1
        self.memory, self.ready, self.engine_ready, self.errors, self.frames = {}, False, False, {}, {}
        for key in RUN_EXTRAS:
            self.extra.pop(key, None)

    def start_args(self, args: dict[str, Any], form: str, truncated: bool) -> None:
        # A repeated line before any progress is the same start-up, not a new run.
        if self.progressed():
            self.new_run()
        elif not self.server_args:
            self.runs += 1
        self.server_args, self.args_form, self.args_truncated = args, form, truncated

    def mem(self, rank: str, **values: Any) -> None:
        self.memory.setdefault(rank, {}).update(values)

    def note(self, key: str, value: Any) -> None:
        """A run-level fact; the first value printed wins (the target model before a draft)."""
        if value is not None and self.extra.get(key) is None:
            self.extra[key] = value

    def add_error(self, kind: str, detail: str, message: str, rank: str, raw: str | None = None) -> None:
        """Record one error line (``message`` cleaned; ``raw`` the line it came from, whose
        tokens and the rank's traceback frames are its mentions)."""
        key = (kind, detail, message)
        entry = self.errors.get(key)
        if entry is None:
            if len(self.errors) >= MAX_DISTINCT_ERRORS:
                return
            entry = self.errors[key] = {"count": 0, "ranks": [], "mentions": {}}
        entry["count"] += 1
        merge(entry["mentions"], mentions(raw if raw is not None else message, self.frames.get(rank, [])))
        if rank != "main" and rank not in entry["ranks"] and len(entry["ranks"]) < MAX_RANKS_PER_ERROR:
            entry["ranks"].append(rank)

    def scan_error(self, message: str, rank: str, level: str = "") -> bool:
        """Record ``message`` when it is an error line; True when it was. A traceback's frames
        are kept for the error that ends it."""
        text = message.strip()
        if text.startswith('File "'):
            frame = FRAME.match(text)
            if frame:
                stack = self.frames.setdefault(rank, [])
                stack.append(frame.group(1))
                del stack[:-MAX_FRAMES]
            return False
        if "Traceback (most recent call last)" in text:
            self.frames[rank] = []
        found = classify(message, self.ready or self.engine_ready, level)
        if found is None:
            return False
        kind, detail = found
        self.add_error(kind, detail, clean_message(message), rank, raw=message)
        return True

    def scan_nccl(self, line: str) -> None:
        if "ccl" in line or "CCL" in line:
            for found in _NCCL_VERSION.finditer(line):
                self.nccl.add(next(group for group in found.groups() if group))

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "server_args": self.server_args,
            "server_args_form": self.args_form,
            "server_args_truncated": self.args_truncated,
            **self.extra,
            "memory": self.memory,
            "ready": self.ready,
            "engine_ready": self.engine_ready,
            "nccl_versions": sorted(self.nccl),
            "errors": sorted((_error(kind, detail, message, entry) for (kind, detail, message), entry in self.errors.items()),
                             key=lambda error: cause_rank(error["kind"])),
            "runs": self.runs,
        }


def _error(kind: str, detail: str, message: str, entry: dict[str, Any]) -> dict[str, Any]:
    ranks = sorted(entry["ranks"], key=rank_order)
    return {"kind": kind, "detail": detail, "message": message, "count": entry["count"], "ranks": ranks,
            "mentions": entry.get("mentions") or {}}


# Run-level facts that a restart replaces (the model and arguments are re-read anyway).
RUN_EXTRAS = ("kv_shortfall", "bench")
