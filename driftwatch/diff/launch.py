"""How the server was launched: explicit flags (argv) and effective args (the log).

SGLang auto-detects some settings (``mem_fraction_static``) and prints the effective value
in its ``server_args`` log line, so "set explicitly to 0.55; the good run auto-detected
0.88" needs both the running server's argv and the log. Where both logs give the numbers,
the KV cache budget is computed the way SGLang sizes it:

    kv_budget = available_after_weights - total * (1 - mem_fraction_static)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from driftwatch.diff import fmt
from driftwatch.diff.change import Change, Severity
from driftwatch.diff.context import Facts, as_dict, ok_facts
from driftwatch.launchargs import typed
from driftwatch.model import ProbeStatus, Snapshot

FRACTIONS = ("mem_fraction_static", "gpu_memory_utilization")
MEMORY = frozenset({
    "max_total_tokens", "chunked_prefill_size", "cuda_graph_max_bs", "max_running_requests",
    "kv_cache_dtype", "context_length", "max_model_len", "max_num_seqs", "max_num_batched_tokens",
    "page_size", "cpu_offload_gb", "quantization", "dtype", "disable_cuda_graph",
})
PARALLEL = frozenset({
    "tp_size", "pp_size", "dp_size", "ep_size", "tensor_parallel_size", "pipeline_parallel_size",
    "data_parallel_size", "enable_dp_attention", "nnodes", "model_path", "model",
})
# Differ on every start without meaning anything.
NOISE = frozenset({"random_seed", "api_key", "admin_api_key"})

Source = str  # "explicit" (argv of the running server) or "log" (effective, maybe auto-detected)
Setting = tuple[Any, Source]

# Logged errors that show a server could not size its memory: the evidence that turns a
# computed negative KV budget from a prediction into an observation.
MEMORY_ERROR_KINDS = frozenset({
    "not_enough_memory", "no_kv_memory", "kv_cache_too_small", "cuda_oom", "oom", "kv-budget", "kv_budget",
    "startup_memory_below_utilization",
})


def _logs(snapshot: Snapshot) -> list[Facts]:
    return [as_dict(log) for log in as_dict(ok_facts(snapshot, "logs").get("logs")).values()]


def _servers(snapshot: Snapshot) -> list[Facts]:
    return [as_dict(server) for server in as_dict(ok_facts(snapshot, "processes").get("servers")).values()]


@dataclass
class LaunchSide:
    """One snapshot's launch settings, and what is unknown about them."""

    logged: dict[str, Any] = field(default_factory=dict)  # effective args the server logged
    explicit: dict[str, Any] = field(default_factory=dict)  # flags on the running server's argv
    fields: set[str] = field(default_factory=set)  # every argument name its logs print
    server_seen: bool = False  # a watched server was running
    log_unknown: bool = False  # a watched log could not be read (or a logs probe failed)

    @classmethod
    def of(cls, snapshot: Snapshot) -> LaunchSide:
        side = cls()
        record = snapshot.probes.get("logs")
        side.log_unknown = record is not None and record.status is not ProbeStatus.ok
        for log in _logs(snapshot):
            side.log_unknown |= bool(log.get("error"))
            side.fields |= set(as_dict(log.get("server_args"))) | set(as_dict(log.get("key_args")))
            side.logged.update(as_dict(log.get("key_args")))
        for server in _servers(snapshot):
            side.server_seen = True
            side.explicit.update({key: typed(value) for key, value in as_dict(server.get("args")).items()})
        return side

    def settings(self, fields: set[str], *, logged: bool, explicit: bool) -> dict[str, Setting]:
        """The log's effective values, overridden by argv; argv names mapped onto the
        names the server logs (``--tp 8`` is ``tp_size=8``)."""
        found: dict[str, Setting] = {}
        if logged:
            found.update({key: (value, "log") for key, value in self.logged.items()})
        if explicit:
            found.update({logged_name(key, fields): (value, "explicit") for key, value in self.explicit.items()})
        return {key: value for key, value in found.items() if key not in NOISE}


def launch_settings(snapshot: Snapshot) -> dict[str, Setting]:
    """Every setting we know for the server: the log's effective value, overridden by argv."""
    side = LaunchSide.of(snapshot)
    return side.settings(side.fields, logged=True, explicit=True)


def logged_name(key: str, fields: set[str]) -> str:
    """The logged field an argv flag sets: itself, or the one field it abbreviates (argparse
    accepts any unique prefix: SGLang's ``--tp`` is ``--tp-size``, logged as ``tp_size``)."""
    if key in fields or not fields:
        return key
    matches = [name for name in fields if name.startswith(key)]
    return matches[0] if len(matches) == 1 else key


def as_number(value: Any) -> float | None:
    """argv values may be strings: '0.55' is the number 0.55."""
    number = typed(value)
    return fmt.number(number)


def same(a: Any, b: Any) -> bool:
    """'0.55' on the command line equals 0.55 in the log; 'True' equals True."""
    if a == b:
        return True
    x, y = as_number(a), as_number(b)
    if x is not None and y is not None:
        return abs(x - y) < 1e-9
    return str(a).lower() == str(b).lower()


def severity_of(key: str) -> Severity:
    if key in FRACTIONS:
        return Severity.critical
    return Severity.high if key in MEMORY or key in PARALLEL else Severity.medium


def flag(key: str) -> str:
    return "--" + key.replace("_", "-")


def describe(key: str, old: Setting | None, new: Setting | None) -> str:
    if new is None:
        assert old is not None
        return f"{flag(key)} {fmt.value(old[0])} is no longer set"
    if old is None:
        return f"{flag(key)} is now {fmt.value(new[0])} (not set in the good run)"
    (ov, osrc), (nv, nsrc) = old, new
    if nsrc == "explicit" and osrc == "log":
        return f"{flag(key)} set explicitly to {fmt.value(nv)}; the good run auto-detected {fmt.value(ov)}"
    if nsrc == "log" and osrc == "explicit":
        return f"{flag(key)} no longer set explicitly ({fmt.value(ov)}); now {fmt.value(nv)}"
    return f"{flag(key)} {fmt.value(ov)} → {fmt.value(nv)}"


def diff_launch(old: Snapshot, new: Snapshot) -> list[Change]:
    a, b = LaunchSide.of(old), LaunchSide.of(new)
    fields = a.fields | b.fields
    # Compare only what both sides know: an unreadable log does not unset what it said,
    # and a server that stopped has no argv to compare (the processes rules say it stopped).
    logged = not (a.log_unknown or b.log_unknown)
    explicit = a.server_seen and b.server_seen
    before = a.settings(fields, logged=logged, explicit=explicit)
    after = b.settings(fields, logged=logged, explicit=explicit)
    if not before or not after:
        return []  # no server known on one side: the processes rules say it started or stopped
    changes: list[Change] = []
    for key in sorted(before.keys() | after.keys()):
        o, n = before.get(key), after.get(key)
        if o is not None and n is not None and same(o[0], n[0]):
            continue
        text = describe(key, o, n)
        if key == "mem_fraction_static" and o is not None and n is not None:
            text += kv_budget_sentence(old, new, as_number(o[0]), as_number(n[0]))
        changes.append(
            Change("launch-arg", key, o[0] if o else None, n[0] if n else None, severity_of(key), text,
                   magnitude=1.0 if key in FRACTIONS else 0.5)
        )
    return changes


def total_gib(snapshot: Snapshot) -> float | None:
    gpus = as_dict(ok_facts(snapshot, "gpu").get("gpus")).values()
    totals = [fmt.number(as_dict(g).get("memory_total_mib")) for g in gpus]
    known = [t for t in totals if t is not None]
    return min(known) / 1024 if known else None


def avail_after_weights_gib(snapshot: Snapshot) -> float | None:
    """The tightest rank's free memory after loading weights, as the server logged it."""
    values = []
    for log in _logs(snapshot):
        for rank in as_dict(log.get("memory")).values():
            value = fmt.number(as_dict(rank).get("avail_mem_after_load_gb"))
            if value is not None:
                values.append(value)
    return min(values) if values else None


def memory_errors(snapshot: Snapshot) -> list[Facts]:
    """The memory-sizing errors the snapshot's logs show, most frequent first."""
    found = [
        as_dict(error) for log in _logs(snapshot) for error in log.get("errors") or []
        if as_dict(error).get("kind") in MEMORY_ERROR_KINDS
    ]
    return sorted(found, key=lambda error: -(fmt.number(error.get("count")) or 1))


def memory_failure(snapshot: Snapshot) -> str | None:
    """The most frequent memory-sizing error the logs show, as one line ("… (8×)")."""
    errors = memory_errors(snapshot)
    if not errors:
        return None
    count = fmt.number(errors[0].get("count")) or 1
    times = f" ({count:.0f}×)" if count > 1 else ""
    return f"{fmt.value(errors[0].get('message')).rstrip('.')}{times}"


def sglang_kv_budget(avail_after_weights: float, total: float, fraction: float) -> float:
    """What SGLang can give its KV cache, in the unit of its inputs (GiB)."""
    return avail_after_weights - total * (1 - fraction)


def reached_ready(snapshot: Snapshot) -> bool:
    return any(log.get("ready") is True for log in _logs(snapshot))


def kv_budget_sentence(old: Snapshot, new: Snapshot, f_old: float | None, f_new: float | None) -> str:
    """SGLang's KV budget for both runs, computed from the logged numbers. Negative is a
    prediction (the server cannot start with it) until the new log shows the error."""
    t_old, t_new = total_gib(old), total_gib(new)
    a_old, a_new = avail_after_weights_gib(old), avail_after_weights_gib(new)
    assumed = a_new is None and a_old is not None
    a_old, a_new = a_old if a_old is not None else a_new, a_new if a_new is not None else a_old
    t_old, t_new = t_old if t_old is not None else t_new, t_new if t_new is not None else t_old
    if None in (f_old, f_new, a_old, a_new, t_old, t_new):
        return ""
    assert f_old is not None and f_new is not None and a_old is not None and a_new is not None
    assert t_old is not None and t_new is not None
    b_old, b_new = sglang_kv_budget(a_old, t_old, f_old), sglang_kv_budget(a_new, t_new, f_new)
    text = (
        f". KV cache budget = free after weights − total × (1 − fraction): good run "
        f"{a_old:.1f} − {t_old:.1f} × {1 - f_old:.2f} = {b_old:.1f} GiB; now "
        f"{a_new:.1f} − {t_new:.1f} × {1 - f_new:.2f} = {b_new:.1f} GiB"
    )
    if assumed:
        text += " (the new run logged no free memory after weights: the good run's is assumed)"
    if b_new >= 0 or b_old < 0:
        return text
    text += f" — the KV budget would be {b_new:.1f} GiB: SGLang cannot start with this"
    failure = memory_failure(new)
    if failure:
        text += f"; the new log shows it failed: {failure}"
    elif reached_ready(new):
        text += "; yet the new log shows the server reached 'ready', so these numbers may be from another run"
    else:
        text += " (predicted: the new log shows no such error)"
    return text + ". A higher fraction gives the KV cache more room, not less"
