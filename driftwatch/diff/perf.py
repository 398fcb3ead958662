"""The perf probe's figures: a drop is an observed symptom, said with what the run saw.

Judged against the host's own history (``facts.figures.judge``: below ``max(5%, 3σ)`` of
the accepted window the old snapshot carries, and confirmed by the new run's
re-measurement); the GPUs against their siblings, the fleet against its median and the
figures against the published limits are judged by ``rules/perf.py`` and ``fleet/perf.py``
with the same module's pure functions. A figure that was not measured is said so, once per section or GPU,
and is never a drop; a rise, or a drop the re-measurement did not confirm, is context.

A drop's line says what the perf run itself recorded that can explain it: the throttle
reasons nvidia-smi showed while that figure ran, the power limit, the SM clock, the PCIe
link under load, persistence mode, and the driver, torch, CUDA, cuBLAS, NCCL (and NCCL's
environment) it ran with. Nothing recorded: "hardware?". Ranking the other probes'
changes under the symptom is the explain stage's work: ``EXPLAINED_BY`` says which (``pulls``).
"""

from __future__ import annotations

import math
from typing import Any

from driftwatch.diff.change import Change, Severity
from driftwatch.diff.context import DiffContext, Facts, as_dict
from driftwatch.facts.figures import (
    comparable,
    drop_severity,
    figures,
    judge,
    kind_of,
    measured,
    name_of,
    number,
    split_key,
    window,
)
from driftwatch.facts.names import gpu_label

KEYS = frozenset({"version", "bound_s", "cpu", "gpu", "gpus", "all_reduce", "history"})

# What an environment change must touch to explain a drop of each kind of figure, most
# likely first: (category, item glob) of the diff's changes, for the explain stage.
EXPLAINED_BY: dict[str, tuple[tuple[str, str], ...]] = {
    "gpu": (("gpu", "*"), ("driver", "*"), ("cuda", "*"), ("package", "torch"), ("package", "nvidia-cublas-*"),
            ("system", "*")),
    "link": (("gpu", "*"), ("system", "*"), ("driver", "*"), ("cuda", "*"), ("package", "torch")),
    "all_reduce": (("nccl", "*"), ("package", "nvidia-nccl-*"), ("env", "NCCL_*"), ("gpu", "topology"), ("gpu", "*"),
                   ("driver", "*"), ("package", "torch"), ("system", "*")),
    "cpu": (("system", "*"), ("package", "numpy"), ("env", "OMP_NUM_THREADS"), ("env", "*_NUM_THREADS")),
}


def pulls(kind: str) -> tuple[str, ...]:
    """``EXPLAINED_BY[kind]`` as the explain stage's globs (``gpu``, ``package:torch``)."""
    return tuple(category if item == "*" else f"{category}:{item}" for category, item in EXPLAINED_BY[kind])


SOFTWARE = (("driver", "driver"), ("torch", "torch"), ("cuda", "CUDA"), ("cublas", "cuBLAS"), ("nccl", "NCCL"))
CPU_SOFTWARE = (("numpy", "numpy"), ("blas", "BLAS"), ("python", "Python"), ("cpu_model", "CPU"))


def diff_perf(old: Facts, new: Facts, ctx: DiffContext) -> list[Change]:
    if old.get("version") != new.get("version"):
        return [Change("perf", "version", old.get("version"), new.get("version"), Severity.info,
                       f"perf figures not compared: the probe's version changed ({old.get('version')} → "
                       f"{new.get('version')}), and figures of different versions are measured differently",
                       context=True)]
    changes = _sections(old, new)
    quiet = {section for section in ("cpu", "gpu") if _status(new, section) != "ok"}
    old_figures, new_figures = figures(old), figures(new)
    unmeasured: dict[tuple[str | None, str, str], list[str]] = {}
    for key in dict.fromkeys([*old_figures, *new_figures]):  # the probe's order: GPU by GPU
        o, n = old_figures.get(key), new_figures.get(key)
        if (n is None and _section_of(key) in quiet) or (n is not None and n.get("status") == "skipped"):
            continue  # said once for its section; a figure this GPU cannot measure (fp8) is no change
        if n is None or measured(n) is None:
            if o is not None and measured(o) is not None:
                gpu, _ = split_key(key)
                why = (n or {}).get("reason") or "not in this run (the GPU is not listed: off the bus?)"
                unmeasured.setdefault((gpu, str((n or {}).get("status") or "missing"), str(why)), []).append(key)
            continue
        if o is None or measured(o) is None:
            continue  # measured now, not before: nothing to compare with
        changes += _compared(key, o, n, old, new)
    changes += [_unmeasured(gpu, status, why, keys, old, new) for (gpu, status, why), keys in unmeasured.items()]
    return changes


def _section_of(key: str) -> str:
    return "cpu" if kind_of(key) == "cpu" else "gpu"


def _status(facts: Facts, section: str) -> str | None:
    value = as_dict(facts.get(section)).get("status")
    return str(value) if value is not None else None


def _sections(old: Facts, new: Facts) -> list[Change]:
    changes = []
    for section, what in (("cpu", "CPU section"), ("gpu", "GPU section")):
        before, after = _status(old, section), _status(new, section)
        if before == after or after is None:
            continue
        reason = as_dict(new.get(section)).get("reason") or ""
        if after in ("error", "timeout"):
            severity = Severity.high if before == "ok" else Severity.medium
            text = f"perf {what} {'failed' if after == 'error' else 'timed out'}: {reason}"
            changes.append(Change("perf", section, before, after, severity, text, symptom=True))
        elif after == "ok":
            changes.append(Change("perf", section, before, after, Severity.info,
                                  f"perf {what} measured again (was {before})", context=True))
        else:  # refused (busy GPUs), skipped (no GPU, no torch): nothing measured, nothing slower
            changes.append(Change("perf", section, before, after, Severity.info,
                                  f"perf {what} {after}: {reason}; its figures are not compared this time", context=True))
    return changes


def _label(facts: Facts, uuid: str | None) -> str:
    if uuid is None:
        return ""
    return gpu_label(as_dict(as_dict(facts.get("gpus")).get(uuid)), uuid)


def figure_label(key: str, old: Facts, new: Facts) -> str:
    """``bf16 GEMM on GPU 5 (H200, 00000000:83:00.0)``, ``CPU GEMM``, ``NCCL all-reduce busbw``."""
    uuid, _ = split_key(key)
    gpu = _label(new, uuid) if uuid in as_dict(new.get("gpus")) else _label(old, uuid)
    return f"{name_of(key)} on {gpu}" if uuid else name_of(key)


def _unmeasured(gpu: str | None, status: str, why: str, keys: list[str], old: Facts, new: Facts) -> Change:
    names = ", ".join(name_of(k) for k in keys)
    where = f" on {_label(new, gpu) if gpu in as_dict(new.get('gpus')) else _label(old, gpu)}" if gpu else ""
    item = gpu or keys[0]
    severity = Severity.high if status in ("error", "timeout", "missing") else Severity.low
    text = f"{names}{where} could not be measured ({status}): {why}; measured before"
    return Change("perf", item, "measured", status, severity, text, label=f"perf{where}", symptom=True)


def step(change: float) -> str:
    """The change in 5-point steps (−23% → "−20%"): an alert or an acceptance holds until it
    is a step worse, not each time noise moves the third digit."""
    bucket = math.floor(abs(change) * 20) * 5
    return f"{'−' if change < 0 else '+'}{bucket}%"


def _fmt(value: float) -> str:
    return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"


def _compared(key: str, o: dict[str, Any], n: dict[str, Any], old: Facts, new: Facts) -> list[Change]:
    label = figure_label(key, old, new)
    unit = n.get("unit") or ""
    if not comparable(o, n):
        return [Change("perf", key, o.get("method"), n.get("method"), Severity.info,
                       f"{label} not compared: measured differently ({o.get('method')} → {n.get('method')})",
                       context=True, label=label)]
    verdict = judge(window(old, key), kind_of(key), o, n)
    if verdict is None:
        return []
    pct = f"{verdict.change * 100:+.0f}%".replace("-", "−")
    figures_text = f"({_fmt(verdict.value)} vs {_fmt(verdict.reference)} {unit})"
    reference = f"{_fmt(verdict.reference)} {unit}"
    if verdict.below and verdict.confirmed:
        why = evidence(key, o, n, old, new)
        text = f"{label} {pct} {figures_text}, confirmed by a re-measurement; {why}"
        return [Change("perf", key, reference, step(verdict.change), drop_severity(-verdict.change), text,
                       magnitude=-verdict.change, label=label, symptom=True, pulls=pulls(kind_of(key)))]
    if verdict.below:
        again = "a re-measurement did not confirm it" if n.get("remeasured") is not None else "no re-measurement was taken"
        text = (f"{label} {pct} {figures_text}, below the {verdict.threshold:.0%} the host's noise allows, but {again}:"
                " not counted")
        return [Change("perf", key, reference, step(verdict.change), Severity.info, text, context=True, label=label)]
    if verdict.rise:
        return [Change("perf", key, reference, step(verdict.change), Severity.info,
                       f"{label} {pct} {figures_text}: faster than its history", context=True, label=label)]
    return []


def evidence(key: str, o: dict[str, Any], n: dict[str, Any], old: Facts, new: Facts) -> str:
    """What this perf run recorded that can explain a drop, most telling first."""
    uuid, name = split_key(key)
    parts: list[str] = []
    o_during, n_during = as_dict(o.get("during")), as_dict(n.get("during"))
    if uuid is not None:
        o_gpu, n_gpu = as_dict(as_dict(old.get("gpus")).get(uuid)), as_dict(as_dict(new.get("gpus")).get(uuid))
        reasons = as_dict(n_during.get("throttle"))
        if reasons:
            before = as_dict(o_during.get("throttle"))
            shown = ", ".join(f"{r}{'' if r in before else ' (new)'}" for r in sorted(reasons, key=lambda r: -reasons[r]))
            parts.append(f"throttle reason{'s' if len(reasons) > 1 else ''} {shown} during the run")
        parts += _moved(o_gpu, n_gpu, "power_limit_w", "power limit", "W")
        parts += _moved(o_during, n_during, "sm_clock_mhz", "SM clock during the run", "MHz", tolerance=0.05)
        if name in ("h2d", "d2h"):
            link = [f"Gen{d.get('pcie_gen')} x{d.get('pcie_width')}" if d.get("pcie_gen") else None
                    for d in (o_during, n_during)]
            if link[0] and link[1] and link[0] != link[1]:
                parts.append(f"PCIe link under load {link[0]} → {link[1]}")
        parts += _moved(o_gpu, n_gpu, "persistence_mode", "persistence mode", "")
    if kind_of(key) == "cpu":
        parts += _software(as_dict(old.get("cpu")), as_dict(new.get("cpu")), CPU_SOFTWARE)
    else:
        parts += _software(as_dict(as_dict(old.get("gpu")).get("context")),
                           as_dict(as_dict(new.get("gpu")).get("context")), SOFTWARE)
    if name == "all_reduce":
        o_env, n_env = as_dict(o.get("env")), as_dict(n.get("env"))
        parts += [f"{k} {o_env.get(k, '(unset)')} → {n_env.get(k, '(unset)')}" for k in sorted(o_env.keys() | n_env.keys())
                  if o_env.get(k) != n_env.get(k)]
    if not parts:
        return "no change this run recorded explains it (clocks, power limit, throttling, link and software as before): hardware?"
    return "; ".join(parts)


def _moved(old: dict[str, Any], new: dict[str, Any], key: str, what: str, unit: str, tolerance: float = 0.0) -> list[str]:
    a, b = old.get(key), new.get(key)
    if a is None or b is None or a == b:
        return []
    x, y = number(a), number(b)
    if x is not None and y is not None and x > 0 and abs(y / x - 1) <= tolerance:
        return []
    shown = (lambda v: f"{v:g}" if isinstance(v, float) else str(v))
    return [f"{what} {shown(a)}{' ' + unit if unit else ''} → {shown(b)}{' ' + unit if unit else ''}"]


def _software(old: dict[str, Any], new: dict[str, Any], names: tuple[tuple[str, str], ...]) -> list[str]:
    return [f"{label} {old.get(key)} → {new.get(key)}" for key, label in names
            if old.get(key) is not None and new.get(key) is not None and old.get(key) != new.get(key)]
