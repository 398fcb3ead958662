"""What a server was launched with and what its log says about memory, read from one snapshot.

SGLang auto-detects some settings (``mem_fraction_static``) and prints the effective value
in its ``server_args`` log line, so a launch setting is the log's effective value overridden
by the running server's argv. The KV cache budget is computed the way SGLang sizes it:

    kv_budget = available_after_weights - total * (1 - mem_fraction_static)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from driftwatch.facts import fmt
from driftwatch.facts.read import Facts, as_dict, ok_facts
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
