"""The perf probe's figures against what the hardware can do, with no history needed.

- a figure below a share of its model's published peak (``gpu_peaks.toml``, each with its
  source): GEMM or HBM copy below 0.6 of the peak, a pinned host<->device copy below 0.75
  of the PCIe link the card has, the all-reduce busbw below 0.6 of NVLink per direction;
- a GPU more than 5% below its siblings of the same model on the same host;
- a hardware slowdown (HW slowdown, power brake, thermal) nvidia-smi showed during the run.

All observed: the snapshot holds the measurement. SW_POWER_CAP alone is a GPU at its power
limit under a full GEMM, which is how it should run, so it is no finding here (the diff
says it beside a drop).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from driftwatch.facts.figures import GPU_FIGURES, below_limit, below_siblings, figure_key, measured, name_of
from driftwatch.facts.names import gpu_label
from driftwatch.facts.read import as_dict
from driftwatch.rules.finding import Finding
from driftwatch.rules.host import Host, Missing
from driftwatch.severity import Severity

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

COMPUTE_RATIO = 0.6  # of the peak: GEMM, HBM copy, all-reduce against NVLink
LINK_RATIO = 0.75  # of the PCIe link's bandwidth per direction
HARDWARE_SLOWDOWNS = ("HW_SLOWDOWN", "HW_POWER_BRAKE_SLOWDOWN", "HW_THERMAL_SLOWDOWN", "SW_THERMAL_SLOWDOWN")
THROTTLE_REFERENCE = "https://docs.nvidia.com/deploy/nvml-api/group__nvmlClocksEventReasons.html"
SIBLINGS_REFERENCE = "https://github.com/hpcfund/hpcfund-issues/issues/19"


@dataclass(frozen=True)
class Peak:
    model: str
    names: tuple[str, ...]
    source: str
    bf16_tflops: float | None = None
    fp8_tflops: float | None = None
    hbm_gb_s: float | None = None
    pcie_gen: int | None = None
    pcie_width: int | None = None
    nvlink_gb_s: float | None = None


@cache
def peaks() -> tuple[tuple[Peak, ...], dict[int, float], str]:
    """(the models, PCIe x16 GB/s per direction by generation, the PCIe source)."""
    text = (resources.files("driftwatch") / "rules" / "gpu_peaks.toml").read_text(encoding="utf-8")
    data = tomllib.loads(text)
    models = tuple(Peak(**{**entry, "names": tuple(entry["names"])}) for entry in data["gpu"])
    pcie = data["pcie"]
    return models, {int(k): float(v) for k, v in pcie["x16_gb_s"].items()}, str(pcie["source"])


def peak_of(name: Any) -> Peak | None:
    """The model whose names hold nvidia-smi's ``NVIDIA H100 80GB HBM3``; None when unknown."""
    shown = str(name or "").strip().lower().removeprefix("nvidia ").strip()
    return next((p for p in peaks()[0] if shown in (n.lower() for n in p.names)), None)


def _gpus(host: Host) -> dict[str, dict[str, Any]]:
    facts = host.facts("perf")
    gpus = {uuid: as_dict(g) for uuid, g in as_dict(facts.get("gpus")).items()}
    if not any(measured(as_dict(f)) is not None for g in gpus.values() for f in as_dict(g.get("figures")).values()):
        raise Missing("the perf probe measured no GPU figure in this snapshot")
    return gpus


# (figure, the peak's field, the share, what it is compared with)
LIMITS = (
    ("gemm_bf16", "bf16_tflops", COMPUTE_RATIO, "the published dense bf16 peak"),
    ("gemm_fp8", "fp8_tflops", COMPUTE_RATIO, "the published dense fp8 peak"),
    ("hbm_copy", "hbm_gb_s", COMPUTE_RATIO, "the published memory bandwidth"),
)


def below_peak(host: Host) -> list[Finding]:
    """GEMM and HBM copy below 0.6 of the model's published peak; host<->device copies below
    0.75 of its PCIe link."""
    gpus = _gpus(host)
    _, pcie, pcie_source = peaks()
    findings = []
    for uuid, gpu in sorted(gpus.items()):
        peak = peak_of(gpu.get("name"))
        if peak is None:
            continue
        figures = as_dict(gpu.get("figures"))
        checks = [(name, getattr(peak, field), ratio, what, peak.source) for name, field, ratio, what in LIMITS]
        link = pcie.get(peak.pcie_gen or 0)
        if link and peak.pcie_width:
            width = f"Gen{peak.pcie_gen} x{peak.pcie_width}"
            checks += [(name, link * peak.pcie_width / 16, LINK_RATIO, f"its {width} link per direction", pcie_source)
                       for name in ("h2d", "d2h")]
        for name, limit, ratio, what, source in checks:
            value = measured(as_dict(figures.get(name)))
            if value is None or not limit or not below_limit(value, limit, ratio):
                continue
            figure = as_dict(figures[name])
            findings.append(Finding(
                severity=Severity.high,
                why=f"{name_of(name)} on {gpu_label(gpu, uuid)} measured {value:.3g} {figure.get('unit')}: "
                    f"{value / limit:.0%} of {what} ({limit:g}), below {ratio:.0%}",
                fix=_fix(name),
                reference=source,
                subjects=(("perf", figure_key(uuid, name)), ("gpu", uuid)),
                key=figure_key(uuid, name), observed=True,
            ))
    return findings


def _fix(name: str) -> str:
    if name in ("h2d", "d2h"):
        return ("check the link under load (nvidia-smi -q -d PCIE: generation and width), reseat or replace the riser "
                "or card; check the BIOS's PCIe settings and the GPU's NUMA placement")
    return ("check the throttle reasons and clocks during load (nvidia-smi -q -d PERFORMANCE,CLOCK), the power limit "
            "(nvidia-smi -q -d POWER) and cooling; a GPU slow with nothing throttling it is a hardware fault: drain and "
            "run the vendor's diagnostics (dcgmi diag -r 3)")


def allreduce_below_nvlink(host: Host) -> list[Finding]:
    facts = host.facts("perf")
    figure = as_dict(facts.get("all_reduce"))
    value = measured(figure)
    if value is None:
        raise Missing("the perf probe measured no all-reduce in this snapshot")
    gpus = as_dict(facts.get("gpus"))
    models = {peak_of(as_dict(g).get("name")) for g in gpus.values()}
    peak = next(iter(models)) if len(models) == 1 else None
    if peak is None or not peak.nvlink_gb_s or not below_limit(value, peak.nvlink_gb_s, COMPUTE_RATIO):
        return []
    return [Finding(
        severity=Severity.high,
        why=f"NCCL all-reduce busbw over {figure.get('ranks')} {peak.model} GPUs measured {value:.3g} GB/s: "
            f"{value / peak.nvlink_gb_s:.0%} of NVLink's {peak.nvlink_gb_s:g} GB/s per direction, below "
            f"{COMPUTE_RATIO:.0%}: the collective is not going over NVLink at full speed",
        fix="check nvidia-smi topo -m and nvidia-smi nvlink -s (links down?), the fabric manager, and NCCL's "
            "environment (NCCL_P2P_DISABLE, NCCL_NVLS_ENABLE); run with NCCL_DEBUG=INFO to see the transport chosen",
        reference=peak.source,
        subjects=(("perf", "all_reduce"),),
        key="all_reduce", observed=True,
    )]


def below_siblings_rule(host: Host) -> list[Finding]:
    """A GPU more than 5% below the median of its siblings (same model, same host)."""
    gpus = _gpus(host)
    findings = []
    for name in GPU_FIGURES:
        by_model: dict[Any, dict[str, float]] = {}
        for uuid, gpu in gpus.items():
            value = measured(as_dict(as_dict(gpu.get("figures")).get(name)))
            if value is not None:
                by_model.setdefault(gpu.get("name"), {})[uuid] = value
        for values in by_model.values():
            for uuid, outlier in sorted(below_siblings(values).items()):
                unit = as_dict(as_dict(gpus[uuid].get("figures")).get(name)).get("unit")
                findings.append(Finding(
                    severity=Severity.high if outlier.below >= 0.15 else Severity.medium,
                    why=f"{name_of(name)} on {gpu_label(gpus[uuid], uuid)} is {outlier.below:.0%} below its siblings "
                        f"({outlier.value:.3g} vs a median of {outlier.median:.3g} {unit}): one slow GPU holds back "
                        "every job that spans the host",
                    fix=_fix(name),
                    reference=SIBLINGS_REFERENCE,
                    subjects=(("perf", figure_key(uuid, name)), ("gpu", uuid)),
                    key=figure_key(uuid, name), observed=True,
                ))
    return findings


def hardware_slowdown(host: Host) -> list[Finding]:
    """HW slowdown, power brake or thermal slowdown seen by nvidia-smi during the run."""
    gpus = _gpus(host)
    findings = []
    for uuid, gpu in sorted(gpus.items()):
        seen = as_dict(as_dict(gpu.get("during")).get("throttle"))
        hits = [r for r in HARDWARE_SLOWDOWNS if r in seen]
        if not hits:
            continue
        shown = ", ".join(f"{r} ({seen[r]:.0%} of the samples)" for r in hits)
        findings.append(Finding(
            severity=Severity.high,
            why=f"{gpu_label(gpu, uuid)} slowed itself down during the perf run: {shown}",
            fix="HW_POWER_BRAKE: the chassis or PSU asserted the power brake (check the PSUs and the BMC's log); "
                "thermal: cooling, fans, airflow; HW_SLOWDOWN: either, or a faulty board",
            reference=THROTTLE_REFERENCE,
            subjects=(("gpu", uuid), *(("perf", figure_key(uuid, n)) for n in GPU_FIGURES)),
            key=uuid, observed=True,
        ))
    return findings
