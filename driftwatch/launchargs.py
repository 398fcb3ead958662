"""Normalise an inference server's command line into flag -> value, for the diff.

``--mem-fraction-static 0.55`` and ``--mem-fraction-static=0.55`` are the same setting and
must compare equal; so must ``--tp-size 8`` and ``--tensor-parallel-size 8`` (argparse
aliases of one SGLang setting). Keys are snake_case; for SGLang the aliases map to the
``ServerArgs`` field names the server prints in its log (``tp_size``, ``model_path``), so
command line and log agree. Values stay strings: the diff compares numbers numerically.

No server is imported: argv is parsed by shape, with the known launch forms found anywhere
in argv so wrappers (``torchrun …``, ``numactl …``, ``env X=1 …``) fall away.
"""

from __future__ import annotations

import os
import re
from typing import Any

_MODULES: dict[str, tuple[str, str]] = {
    "sglang.launch_server": ("sglang", "sglang.launch_server"),
    "vllm.entrypoints.openai.api_server": ("vllm", "vllm.entrypoints.openai.api_server"),
    "vllm.entrypoints.api_server": ("vllm", "vllm.entrypoints.api_server"),
}
# Script paths of the same modules (``python /src/sglang/python/sglang/launch_server.py``).
_SCRIPTS: dict[str, str] = {
    "sglang/launch_server.py": "sglang.launch_server",
    "vllm/entrypoints/openai/api_server.py": "vllm.entrypoints.openai.api_server",
    "vllm/entrypoints/api_server.py": "vllm.entrypoints.api_server",
}
# ``sglang serve`` / ``vllm serve``: console scripts, or their modules run with -m.
_CLIS: dict[str, str] = {
    "sglang": "sglang",
    "vllm": "vllm",
    "sglang.cli.main": "sglang",
    "vllm.entrypoints.cli.main": "vllm",
}
_ALIASES: dict[str, dict[str, str]] = {
    "sglang": {
        "tensor_parallel_size": "tp_size",
        "pipeline_parallel_size": "pp_size",
        "data_parallel_size": "dp_size",
        "expert_parallel_size": "ep_size",
        "ep": "ep_size",
        # argparse accepts unique prefixes: `--tp 8` is `--tp-size 8` to SGLang.
        "tp": "tp_size",
        "pp": "pp_size",
        "dp": "dp_size",
        "model": "model_path",
        "nccl_init_addr": "dist_init_addr",
        "speculative_draft_model": "speculative_draft_model_path",
    },
    "vllm": {
        "tp": "tensor_parallel_size",
        "pp": "pipeline_parallel_size",
        "dp": "data_parallel_size",
        "dcp": "decode_context_parallel_size",
        "q": "quantization",
    },
}
# Switches that never take a value: the next word after them is not theirs. Everything
# else with a following non-flag word is taken to have that word as its value.
_SWITCH_PREFIXES = ("enable_", "disable_", "no_")
_SWITCHES = frozenset(
    {"trust_remote_code", "enforce_eager", "skip_tokenizer_init", "is_embedding", "skip_server_warmup",
     "log_requests", "show_time_cost", "allow_auto_truncate", "enable_metrics", "help", "version"}
)
_BOOL_WORDS = frozenset({"true", "false"})
_NUMBER_RE = re.compile(r"-\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|-\.\d+")
_INT = re.compile(r"-?\d+")
_FLOAT = re.compile(r"-?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")


def typed(value: Any) -> Any:
    """argv words as the values they stand for: '8' is 8, '0.55' is 0.55, 'true' is True,
    so a setting reads the same type from a command line as from a server's log."""
    if isinstance(value, list):
        return [typed(item) for item in value]
    if not isinstance(value, str):
        return value
    if _INT.fullmatch(value):
        return int(value)
    if _FLOAT.fullmatch(value):
        return float(value)
    return {"true": True, "false": False}.get(value.lower(), value)


def _is_flag(word: str) -> bool:
    """``--x``/``-x``; but ``-1``, ``-0.5`` and a lone ``-`` are values."""
    return word.startswith("-") and word != "-" and not _NUMBER_RE.fullmatch(word)


def find_entry(argv: list[str]) -> tuple[str | None, str | None, int]:
    """(kind, entry, index of the first word after the entry point) — (None, None, 1) if none."""
    for i, word in enumerate(argv):
        module = word[2:] if word.startswith("-m") and len(word) > 2 else None
        if word == "-m" and i + 1 < len(argv):
            module, i = argv[i + 1], i + 1
        if module is not None:
            if module in _MODULES:
                kind, entry = _MODULES[module]
                return kind, entry, i + 1
            if module in _CLIS and argv[i + 1 : i + 2] == ["serve"]:
                return _CLIS[module], f"{_CLIS[module]} serve", i + 2
            continue
        path = word.replace("\\", "/")
        for suffix, entry in _SCRIPTS.items():
            if path == suffix or path.endswith("/" + suffix):
                return _MODULES[entry][0], entry, i + 1
        name = os.path.basename(path)
        if name in ("sglang", "vllm") and argv[i + 1 : i + 2] == ["serve"]:
            return name, f"{name} serve", i + 2
    return None, None, 1


def _canonical(flag: str, kind: str | None) -> str:
    name = flag.lstrip("-").replace("-", "_")
    return _ALIASES.get(kind or "", {}).get(name, name)


def _takes_value(name: str, following: str) -> bool:
    if name in _SWITCHES or name.startswith(_SWITCH_PREFIXES):
        return following.lower() in _BOOL_WORDS
    return True


def parse_launch_args(argv: list[str]) -> dict[str, Any]:
    """``{"kind", "entry", "model", "args"}`` for a server's argv (see module docstring).

    ``model`` is the positional model of ``vllm serve MODEL`` when given, else the value of
    ``--model-path``/``--model``. A switch is ``True``; a repeated flag or one with several
    values (``--cuda-graph-bs 1 2 4``) is a list in order. In ``serve`` forms the first
    stray word before any model is the model (``vllm serve --port 8000 MODEL``).
    """
    kind, entry, start = find_entry(argv)
    wants_model = entry == "vllm serve"  # the only form with a positional model
    values: dict[str, list[Any]] = {}
    positionals: list[str] = []
    last: str | None = None  # flag that took a value and may take more (nargs="+")
    words = argv[start:]
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if word == "--":
            positionals.extend(words[i:])
            break
        if _is_flag(word):
            flag, eq, value = word.partition("=")
            name = _canonical(flag, kind)
            last = None
            if eq:
                values.setdefault(name, []).append(value)
                last = name
            elif i < len(words) and not _is_flag(words[i]) and _takes_value(name, words[i]):
                values.setdefault(name, []).append(words[i])
                i += 1
                last = name
            else:
                values.setdefault(name, []).append(True)
            continue
        if wants_model and not positionals and "model" not in values:
            positionals.append(word)
        elif last is not None:
            values[last].append(word)
        else:
            positionals.append(word)
    args = {name: vals[0] if len(vals) == 1 else vals for name, vals in values.items()}
    model = positionals[0] if wants_model and positionals else None
    for key in ("model_path", "model"):
        given = args.get(key)
        if model is None and isinstance(given, str):
            model = given
    return {"kind": kind, "entry": entry, "model": model, "args": args}
