"""How the server was launched: explicit flags (argv) and effective args (the log).

SGLang auto-detects some settings (``mem_fraction_static``) and prints the effective value
in its ``server_args`` log line, so "set explicitly to 0.55; the good run auto-detected
0.88" needs both the running server's argv and the log. Where both logs give the numbers,
the KV cache budget is computed the way SGLang sizes it:

    kv_budget = available_after_weights - total * (1 - mem_fraction_static)
"""

from __future__ import annotations

from typing import Any

from driftwatch.diff import fmt
from driftwatch.diff.change import Change, Severity
from driftwatch.diff.context import Facts, as_dict
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


def _ok_facts(snapshot: Snapshot, probe: str) -> Facts:
    record = snapshot.probes.get(probe)
    return record.facts if record is not None and record.status is ProbeStatus.ok else {}


def launch_settings(snapshot: Snapshot) -> dict[str, tuple[Any, Source]]:
    """Every setting we know for the server: the log's effective value, overridden by argv."""
    settings: dict[str, tuple[Any, Source]] = {}
    for log in as_dict(_ok_facts(snapshot, "logs").get("logs")).values():
        for key, value in as_dict(as_dict(log).get("key_args")).items():
            settings[key] = (value, "log")
    for server in as_dict(_ok_facts(snapshot, "processes").get("servers")).values():
        for key, value in as_dict(as_dict(server).get("args")).items():
            settings[key] = (value, "explicit")
    return {k: v for k, v in settings.items() if k not in NOISE}


def as_number(value: Any) -> float | None:
    """argv values are strings: '0.55' is the number 0.55."""
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return fmt.number(value)


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


def describe(key: str, old: tuple[Any, Source] | None, new: tuple[Any, Source] | None) -> str:
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
    before, after = launch_settings(old), launch_settings(new)
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
    gpus = as_dict(_ok_facts(snapshot, "gpu").get("gpus")).values()
    totals = [fmt.number(as_dict(g).get("memory_total_mib")) for g in gpus]
    known = [t for t in totals if t is not None]
    return min(known) / 1024 if known else None


def avail_after_weights_gib(snapshot: Snapshot) -> float | None:
    """The tightest rank's free memory after loading weights, as the server logged it."""
    values = []
    for log in as_dict(_ok_facts(snapshot, "logs").get("logs")).values():
        for rank in as_dict(as_dict(log).get("memory")).values():
            value = fmt.number(as_dict(rank).get("avail_mem_after_load_gb"))
            if value is not None:
                values.append(value)
    return min(values) if values else None


def kv_budget_sentence(old: Snapshot, new: Snapshot, f_old: float | None, f_new: float | None) -> str:
    t_old, t_new = total_gib(old), total_gib(new)
    a_old, a_new = avail_after_weights_gib(old), avail_after_weights_gib(new)
    a_old, a_new = a_old if a_old is not None else a_new, a_new if a_new is not None else a_old
    t_old, t_new = t_old if t_old is not None else t_new, t_new if t_new is not None else t_old
    if None in (f_old, f_new, a_old, a_new, t_old, t_new):
        return ""
    assert f_old is not None and f_new is not None and a_old is not None and a_new is not None
    assert t_old is not None and t_new is not None
    b_old, b_new = a_old - t_old * (1 - f_old), a_new - t_new * (1 - f_new)
    text = (
        f". KV cache budget = free after weights − total × (1 − fraction): good run "
        f"{a_old:.1f} − {t_old:.1f} × {1 - f_old:.2f} = {b_old:.1f} GiB; now "
        f"{a_new:.1f} − {t_new:.1f} × {1 - f_new:.2f} = {b_new:.1f} GiB"
    )
    if b_new < 0 <= b_old:
        text += (
            " — negative: no room for the KV cache, hence 'Not enough memory' on every rank. "
            "A higher fraction gives the KV cache more room, not less"
        )
    return text
