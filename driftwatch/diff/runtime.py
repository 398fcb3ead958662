"""The running server and its log: environment, loaded libraries, errors, readiness, KV cache.

Launch flags themselves are compared in ``launch.py``, across the processes and logs
probes; these rules cover everything else those two probes record.
"""

from __future__ import annotations

from typing import Any

from driftwatch.facts import fmt
from driftwatch.diff.change import Change, Severity
from driftwatch.diff.context import DiffContext
from driftwatch.diff.servers import match_servers
from driftwatch.diff.sides import sides
from driftwatch.facts.read import Facts, as_dict
from driftwatch.logparse.errors import CAUSE_ORDER, cause_rank
from driftwatch.logparse.headline import ENGINE_NAMES, summarize_log

PROCESS_KEYS = frozenset({"servers", "login_env", "login_shell", "login_env_error", "truncated"})
LOG_KEYS = frozenset({"logs"})
# Settings that change which GPUs, which NCCL transport, which kernels or which shared
# libraries a job uses.
HIGH_ENV_PREFIXES = (
    "NCCL_", "CUDA_", "SGLANG_", "SGL_", "NVIDIA_", "PYTORCH_CUDA_ALLOC_CONF", "TORCH_",
    "VLLM_", "NVSHMEM_", "UCX_", "LD_PRELOAD", "LD_LIBRARY_PATH",
)
LIBRARY_HINTS = ("libnccl", "sgl_kernel", "sgl-kernel", "flashinfer", "libcudart", "vllm/_C")
KV_SHRINK = 0.10


def diff_processes(old: Facts, new: Facts, ctx: DiffContext) -> list[Change]:
    changes: list[Change] = []
    before, after = as_dict(old.get("servers")), as_dict(new.get("servers"))
    # Paired by key, then by what they serve (diff/servers.py): never crosswise.
    pairs = match_servers(before, after)
    for key in sorted(before.keys() - {o for o, _ in pairs}):
        changes.append(Change("process", key, "running", None, Severity.high, f"server {key} is no longer running",
                              symptom=True))
    for key in sorted(after.keys() - {n for _, n in pairs}):
        changes.append(Change("process", key, None, "running", Severity.medium, f"server {key} is running (not {sides().in_old})"))
    for old_key, key in pairs:
        o, n = as_dict(before[old_key]), as_dict(after[key])
        changes += _env(f"{key} env", o.get("env"), n.get("env"))
        changes += _libraries(key, o.get("libraries"), n.get("libraries"))
    changes += _env("login shell env", old.get("login_env"), new.get("login_env"))
    if new.get("login_env") is None and old.get("login_env") is not None:
        text = f"the login shell's environment could not be read: {fmt.value(new.get('login_env_error'))}"
        changes.append(Change("env", "(login shell)", None, new.get("login_env_error"), Severity.low, text))
    return changes


def _env(where: str, old_env: Any, new_env: Any) -> list[Change]:
    if not isinstance(old_env, dict) or not isinstance(new_env, dict):
        return []  # null: unreadable on one side (e.g. /proc/PID/environ denied), not "unset"
    old, new = old_env, new_env
    changes = []
    for name in sorted(old.keys() | new.keys()):
        o, n = old.get(name), new.get(name)
        if o == n:
            continue
        severity = Severity.high if name.startswith(HIGH_ENV_PREFIXES) else Severity.medium
        if o is None:
            text = f"{name}={fmt.value(n)} is now set ({where})"
        elif n is None:
            text = f"{name} (was {fmt.value(o)}) is no longer set ({where})"
        else:
            text = f"{name} {fmt.value(o)} → {fmt.value(n)} ({where})"
        changes.append(Change("env", name, o, n, severity, text))
    return changes


def _libraries(server: str, old: Any, new: Any) -> list[Change]:
    if not isinstance(old, list) or not isinstance(new, list):
        return []  # unreadable on one side: nothing to compare
    gone, came = sorted(set(old) - set(new)), sorted(set(new) - set(old))
    if not gone and not came:
        return []
    key = any(h in path for path in gone + came for h in LIBRARY_HINTS)
    text = f"server {server} now loads {fmt.listing(came) or 'nothing new'}" + (f" instead of {fmt.listing(gone)}" if gone else "")
    return [Change("process", f"{server} libraries", gone, came, Severity.high if key else Severity.medium, text)]


def diff_logs(old: Facts, new: Facts, ctx: DiffContext) -> list[Change]:
    changes: list[Change] = []
    before, after = as_dict(old.get("logs")), as_dict(new.get("logs"))
    for pattern in sorted(before.keys() & after.keys()):
        o, n = as_dict(before[pattern]), as_dict(after[pattern])
        where = str(n.get("path") or pattern)
        if o.get("error") or n.get("error"):
            # A log that could not be read (or found) says nothing about the server: one
            # finding, never "NCCL → nothing" or errors gone.
            changes += _log_unreadable(where, o.get("error"), n.get("error"))
            continue
        changes += _errors(where, o.get("errors"), n.get("errors"))
        if o.get("ready") is True and n.get("ready") is False:
            # What the log says instead, as show prints it: "not ready: kv-budget error (8×): …".
            state = summarize_log(n)[-1] if n.get("kind") else "not ready"
            changes.append(Change("log", where, True, False, Severity.high,
                                  f"the server in {where} no longer reaches 'ready' ({_plain(state)})", symptom=True))
        changes += _kv_cache(where, o, n)
        changes += _version(where, o, n)
        if (o.get("nccl_versions") or []) != (n.get("nccl_versions") or []) and o.get("nccl_versions"):
            changes.append(Change("nccl", where, o.get("nccl_versions"), n.get("nccl_versions"), Severity.high,
                                  f"the server's NCCL {fmt.listing(o['nccl_versions'])} → {fmt.listing(n.get('nccl_versions') or [])}"))
    return changes


def _log_unreadable(where: str, old_error: Any, new_error: Any) -> list[Change]:
    if old_error == new_error:
        return []
    if new_error:
        text = f"{where} could not be read: {fmt.value(new_error)}; its facts are not compared"
        return [Change("log", where, None, new_error, Severity.low, text)]
    text = f"{where} can be read again (was: {fmt.value(old_error)}); its facts are not compared this time"
    return [Change("log", where, old_error, None, Severity.info, text)]


def _plain(state: str) -> str:
    return state if len(state) <= 200 else state[:199] + "…"


def _error_key(error: Facts) -> tuple[Any, Any]:
    # Logs stored before error kinds were grouped have no "detail": their kind was the detail.
    return error.get("kind"), error.get("detail", error.get("kind"))


def _errors(where: str, old: Any, new: Any) -> list[Change]:
    seen = {_error_key(e) for e in old or [] if isinstance(e, dict)}
    fresh: dict[tuple[Any, Any], Facts] = {}
    named: dict[tuple[Any, Any], list[str]] = {}
    for error in new or []:
        if isinstance(error, dict) and _error_key(error) not in seen:
            fresh.setdefault(_error_key(error), error)
            # One failure said several ways (NCCL's "posix_fallocate failed", then the segment
            # it could not create): the change is the first line, and names what all of them name.
            kept = named.setdefault(_error_key(error), [])
            kept += [name for name in _mentions(error) if name not in kept]
    changes = []
    for (kind, detail), error in fresh.items():
        count = error.get("count") or 1
        ranks = f" ({count}×)" if count > 1 else ""
        # A root cause (a KV budget, an allocation) ranks above "the engine failed to start".
        order = cause_rank(kind)
        changes.append(Change("log", f"{where}: {kind}" + (f" ({detail})" if detail and detail != kind else ""), None,
                              error.get("message"), Severity.high,
                              f"new {kind} error in {where}{ranks}: {fmt.ends(error.get('message'))}",
                              magnitude=float(len(CAUSE_ORDER) - order), symptom=True, mentions=tuple(named[(kind, detail)]),
                              headline=f"new {kind} error{ranks}: {fmt.ends(error.get('message'), 120)}"))
    return changes


def _mentions(error: Facts) -> tuple[str, ...]:
    """The names the log parser found in an error (libraries, modules, paths, env, error names)."""
    found = as_dict(error.get("mentions"))
    return tuple(str(name) for names in found.values() if isinstance(names, list) for name in names)


def _version(where: str, old: Facts, new: Facts) -> list[Change]:
    o, n = old.get("version") or old.get("vllm_version"), new.get("version") or new.get("vllm_version")
    if not o or not n or o == n:
        return []
    engine = ENGINE_NAMES.get(str(new.get("kind")), "server")
    return [Change("log", f"{where}: version", o, n, Severity.medium,
                   f"{engine} {fmt.value(o)} → {fmt.value(n)}, as its log in {where} says")]


def _kv_cache(where: str, old: Facts, new: Facts) -> list[Change]:
    o, n = _kv_tokens(old), _kv_tokens(new)
    if o is None or n is None or o <= 0 or n >= o * (1 - KV_SHRINK):
        return []
    text = f"KV cache shrank from {o:,.0f} to {n:,.0f} tokens ({(n - o) / o:+.0%}) in {where}: fewer concurrent requests fit"
    max_len = new.get("max_seq_len")
    if isinstance(max_len, int) and n < max_len:
        text += f"; {n:,.0f} tokens < max seq len {max_len:,}: one full-length request does not fit"
    return [Change("log", f"{where}: kv cache", o, n, Severity.medium, text, magnitude=(o - n) / o, symptom=True)]


def _kv_tokens(log: Facts) -> float | None:
    values = []
    for rank in as_dict(log.get("memory")).values():
        rank = as_dict(rank)
        value = rank.get("max_total_num_tokens") or rank.get("kv_cache_tokens")
        if isinstance(value, (int, float)):
            values.append(float(value))
    return min(values) if values else None
