"""The perf probe's figures as people read them: ``show``'s rows and the HTML bar chart.

Pure: facts in, plain strings and numbers out; escaping is the renderers' (``clean``,
Jinja2's autoescape). A figure that was not measured shows its status, never a 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from driftwatch.facts.names import gpu_label
from driftwatch.facts.read import as_dict
from driftwatch.facts.figures import GPU_FIGURES, NAMES, measured, number

COLUMNS = ("bf16 GEMM", "fp8 GEMM", "HBM copy", "H2D", "D2H")


def shown(figure: Any) -> str:
    """``798 TFLOP/s`` (with ``, re-measured 801`` when it was), or the reason it is missing."""
    figure = as_dict(figure)
    value = measured(figure)
    if value is None:
        status = figure.get("status") or "absent"
        return f"{status}: {figure['reason']}" if figure.get("reason") and status != "skipped" else str(status)
    again = number(figure.get("remeasured"))
    return f"{value:.3g} {figure.get('unit') or ''}".strip() + (f" (re-measured {again:.3g})" if again else "")


def _throttle(gpu: dict[str, Any]) -> str:
    reasons = as_dict(as_dict(gpu.get("during")).get("throttle"))
    return ", ".join(f"{r} {share:.0%}" for r, share in sorted(reasons.items(), key=lambda kv: -kv[1])) or "-"


def show_rows(facts: dict[str, Any]) -> tuple[list[list[str]], list[str]]:
    """(aligned rows, notes) for ``show``'s perf section."""
    rows: list[list[str]] = []
    notes: list[str] = []
    cpu = as_dict(facts.get("cpu"))
    if cpu.get("status") == "ok":
        how = f"{cpu.get('backend')} {cpu.get('numpy') or ''}".strip() + f", {cpu.get('threads')} thread(s)"
        figures = as_dict(cpu.get("figures"))
        rows.append(["CPU", how, f"GEMM {shown(figures.get('gemm'))}", f"copy {shown(figures.get('copy'))}"])
    elif cpu:
        notes.append(f"CPU section {cpu.get('status')}: {cpu.get('reason')}")
    gpu = as_dict(facts.get("gpu"))
    if gpu.get("status") not in (None, "ok"):
        notes.append(f"GPU section {gpu.get('status')}: {gpu.get('reason')}")
    gpus = sorted(as_dict(facts.get("gpus")).items(), key=lambda kv: number(as_dict(kv[1]).get("index")) or 0)
    measured_gpus = [(u, as_dict(g)) for u, g in gpus if as_dict(as_dict(g).get("figures"))]
    if measured_gpus:
        rows.append(["GPU", *COLUMNS, "throttled during the run"])
        for uuid, entry in measured_gpus:
            figures = as_dict(entry.get("figures"))
            rows.append([gpu_label(entry, uuid), *(shown(figures.get(n)) for n in GPU_FIGURES), _throttle(entry)])
    reduce = facts.get("all_reduce")
    if isinstance(reduce, dict):
        ranks = f" over {reduce.get('ranks')} GPUs" if reduce.get("ranks") else ""
        rows.append([f"all-reduce{ranks}", f"busbw {shown(reduce)}", f"NCCL {reduce.get('nccl') or '?'}"])
    context = as_dict(gpu.get("context"))
    if context.get("torch"):
        notes.append("ran with " + ", ".join(f"{k} {context[k]}" for k in ("driver", "torch", "cuda", "cublas", "nccl")
                                             if context.get(k)))
    return rows, notes


@dataclass(frozen=True)
class Bar:
    label: str
    old: float | None
    new: float | None
    old_width: int  # percent of the chart's widest bar
    new_width: int
    text: str  # "612 vs 798 TFLOP/s (−23%)"
    slower: bool


@dataclass(frozen=True)
class Chart:
    title: str
    bars: list[Bar]


def charts(old: dict[str, Any], new: dict[str, Any], *, drop: float = 0.05) -> list[Chart]:
    """Per figure, a bar per GPU: the old run's beside the new one's (missing: no bar)."""
    found = []
    old_gpus, new_gpus = as_dict(old.get("gpus")), as_dict(new.get("gpus"))
    order = sorted(new_gpus.keys() | old_gpus.keys(),
                   key=lambda u: number(as_dict(new_gpus.get(u) or old_gpus.get(u)).get("index")) or 0)
    for name in GPU_FIGURES:
        pairs = []
        unit = ""
        for uuid in order:
            a = measured(as_dict(as_dict(as_dict(old_gpus.get(uuid)).get("figures")).get(name)))
            b = measured(as_dict(as_dict(as_dict(new_gpus.get(uuid)).get("figures")).get(name)))
            unit = unit or str(as_dict(as_dict(as_dict(new_gpus.get(uuid) or old_gpus.get(uuid)).get("figures")).get(name)).get("unit") or "")
            if a is not None or b is not None:
                pairs.append((gpu_label(as_dict(new_gpus.get(uuid) or old_gpus.get(uuid)), uuid), a, b))
        if not pairs:
            continue
        top = max(v for _, a, b in pairs for v in (a, b) if v is not None)
        bars = []
        for label, a, b in pairs:
            change = f" ({(b / a - 1) * 100:+.0f}%)".replace("-", "−") if a and b else ""
            text = f"{_n(b)} vs {_n(a)} {unit}{change}"
            bars.append(Bar(label, a, b, _width(a, top), _width(b, top), text, bool(a and b and b < a * (1 - drop))))
        found.append(Chart(f"{NAMES[name]} ({unit})", bars))
    return found


def _n(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def _width(value: float | None, top: float) -> int:
    return 0 if value is None or top <= 0 else max(1, round(100 * value / top))
