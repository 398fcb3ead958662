"""A launch command written into the log: by a wrapper script that echoes it, or by a person
pasting it above the output (``python3 -m sglang.launch_server --model-path … --tp 8``).

It says what the server was asked for when the server itself prints no argument line (an
offline bench, a crash before the arguments were logged, a vLLM build that prints only
``non-default args``). Parsed by ``driftwatch.launchargs``, the same code that reads a
running server's argv, so the keys match ``key_args`` and the processes probe.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from driftwatch.launchargs import parse_launch_args, typed
from driftwatch.logparse.common import LogFacts

# Offline entry points take the server's flags; launchargs knows the servers' own.
_OFFLINE = re.compile(r"\bsglang\.(?:bench_one_batch|bench_latency|bench_offline_throughput|bench_one_batch_server)\b")
_MARKER = re.compile(
    r"(?:-m +|/)(?:sglang\.launch_server|sglang[./]bench_\w+|vllm\.entrypoints\.\w+(?:\.api_server)?)\b"
    r"|(?:^|[\s/])(?:vllm|sglang) serve\b|(?:^|[\s/])benchmark_(?:throughput|latency)\.py\b"
)
_VLLM_SCRIPTS = ("benchmark_throughput.py", "benchmark_latency.py")
_VLLM_SERVER = "vllm/entrypoints/openai/api_server.py"
# Where a pasted command ends: a closing backtick of inline markdown, a pipe, a redirection.
_END = re.compile(r"`| \| | ; | && | 2?>&?\d? ")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
MAX_COMMAND = 8 * 1024
MAX_CONTINUATIONS = 60


def is_command(line: str) -> bool:
    return ("sglang" in line or "vllm" in line) and _MARKER.search(line[:MAX_COMMAND]) is not None


def join_command(lines: list[str], at: int) -> tuple[str, int]:
    """The command starting at ``lines[at]`` with its backslash continuations; and how many
    following lines it took."""
    text, used = lines[at].rstrip(), 0
    while text.endswith("\\") and used < MAX_CONTINUATIONS and at + used + 1 < len(lines):
        used += 1
        text = text[:-1] + " " + lines[at + used].strip()
        if len(text) > MAX_COMMAND:
            break
    return text[:MAX_COMMAND], used


def parse_command(text: str) -> dict[str, Any] | None:
    """``{"entry", "model", "args"}`` of a command line, or None when it names no server.

    A shell prompt, ``CUDA_VISIBLE_DEVICES=0``, ``nohup`` or ``torchrun`` in front fall away
    (launchargs finds the entry point anywhere in the words).
    """
    end = _END.search(text, start.end()) if (start := _MARKER.search(text)) else None
    text = text[: end.start()] if end else text
    try:
        words = shlex.split(text, comments=False, posix=True)
    except ValueError:  # an unbalanced quote in a pasted line
        words = text.split()
    entry = None
    for i, word in enumerate(words):
        if _OFFLINE.fullmatch(word) or word.endswith(_VLLM_SCRIPTS):
            # Offline entry points take the server's own flags: read them as the server's.
            entry, words[i] = word, "sglang.launch_server" if word.startswith("sglang") else _VLLM_SERVER
            break
        if word == "vllm" and words[i + 1 : i + 2] == ["bench"]:
            entry, words[i + 1 : i + 3] = f"vllm bench {' '.join(words[i + 2 : i + 3])}".strip(), ["serve"]
            break
    parsed = parse_launch_args(words)
    if parsed["entry"] is None:
        return None
    args = {key: typed(_first_word(value)) for key, value in parsed["args"].items()}
    return {"entry": entry or parsed["entry"], "model": parsed["model"], "args": args}


def _first_word(value: Any) -> Any:
    """``--port 8000 follow error:`` in a sentence: the flag's value is its first word. A list
    of numbers (``--cuda-graph-bs 1 2 4``) stays a list."""
    if isinstance(value, list) and value and not all(isinstance(v, str) and _NUMBER.fullmatch(v) for v in value):
        return value[0]
    return value


def take_command(facts: LogFacts, lines: list[str], at: int) -> int:
    """Note the command at ``lines[at]`` (the first one a log shows); returns the continuation
    lines it took."""
    command, used = join_command(lines, at)
    facts.note("command", parse_command(command))
    return used
