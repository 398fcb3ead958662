"""The perf probe's figures as everything downstream reads them, and their noise model.

A figure is a measured throughput (``value``: the median of its batches, ``p10``/``p90``:
their spread) or the reason there is none (``status`` skipped, refused, error, timeout):
a missing figure is never a 0 that reads as "slower". Figures are keyed ``cpu.gemm``,
``gpu.<UUID>.gemm_bf16``, ``all_reduce``, and compared only at the same probe
``VERSION``, unit and method.

When is a lower figure a drop? Relative to the *reference*, the median of the host's last
accepted figures (the ``history`` the probe carries forward in each snapshot), by more
than ``max(5%, 3σ)``, σ being the larger of the history's own spread (log scale, once it
holds ``MIN_HISTORY`` values, the kind's noise floor before that) and the two runs' spread
between their batches. A drop counts once a re-measurement in the same run confirmed it:
the probe measures a figure again when it falls below the previous snapshot's floor. The
judges that need no history (a GPU against its siblings, a host against the fleet, a
figure against a published limit) are here too: diff/, rules/ and fleet/ all use them.

The CPU floor comes from measurement (bench/README.md, "perf noise";
tests/fixtures/perf): on the shared 2-core development machine at load 10-13, 80 runs of
the CPU section back to back had a log-scale spread of 0.25-0.70, and one figure fell to
0.36x of the run before it with both runs' batches tight (a quiet moment, then a busy
one); σ = 0.40 puts the threshold at 70% (0.30x) while the history is short. A host's own
history, once long enough, says how noisy it is. GPU figures on idle GPUs are far
steadier: their floors (2-3%) await a GPU machine's runs.
Pure: no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from driftwatch.facts.read import as_dict
from driftwatch.severity import Severity

VERSION = 1  # of the perf probe's measurements: figures of different versions are never compared
MIN_DROP = 0.05
SIGMAS = 3.0
WINDOW = 10  # accepted values kept per figure
MIN_HISTORY = 5  # fewer: the kind's noise floor stands in for the history's spread
NEW_LEVEL = 3  # a level that holds for this many runs in a row is the host's level now
# σ on the log scale when the history is short (see the module's docstring).
NOISE_FLOOR = {"cpu": 0.40, "gpu": 0.02, "link": 0.03, "all_reduce": 0.03}
_Z90 = 2.5631  # p90 - p10 of a normal distribution, in σ
GPU_FIGURES = ("gemm_bf16", "gemm_fp8", "hbm_copy", "h2d", "d2h")
LINK_FIGURES = ("h2d", "d2h")
NAMES = {
    "cpu.gemm": "CPU GEMM", "cpu.copy": "CPU memory copy", "gemm_bf16": "bf16 GEMM", "gemm_fp8": "fp8 GEMM",
    "hbm_copy": "HBM copy", "h2d": "host-to-device copy", "d2h": "device-to-host copy", "all_reduce": "NCCL all-reduce busbw",
}


def median(values: Any) -> float:
    """The median (``statistics`` costs ~10 ms of every command's start: not for this)."""
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def figure_key(gpu: str | None, name: str) -> str:
    return f"gpu.{gpu}.{name}" if gpu else name


def split_key(key: str) -> tuple[str | None, str]:
    """(GPU UUID or None, figure name) of a key."""
    if key.startswith("gpu."):
        uuid, _, name = key[4:].rpartition(".")
        return uuid, name
    return None, key


def kind_of(key: str) -> str:
    _, name = split_key(key)
    if key.startswith("cpu."):
        return "cpu"
    if name in LINK_FIGURES:
        return "link"
    return "all_reduce" if name == "all_reduce" else "gpu"


def name_of(key: str) -> str:
    _, name = split_key(key)
    return NAMES.get(key) or NAMES.get(name, name)


def figures(facts: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every figure of a perf probe's facts by key, measured or not."""
    found: dict[str, dict[str, Any]] = {}
    for name, figure in as_dict(as_dict(facts.get("cpu")).get("figures")).items():
        found[f"cpu.{name}"] = as_dict(figure)
    for uuid, gpu in as_dict(facts.get("gpus")).items():
        for name, figure in as_dict(as_dict(gpu).get("figures")).items():
            found[figure_key(uuid, name)] = as_dict(figure)
    if isinstance(facts.get("all_reduce"), dict):
        found["all_reduce"] = facts["all_reduce"]
    return found


def measured(figure: dict[str, Any]) -> float | None:
    """The figure's value, only when it was measured (a positive number)."""
    value = number(figure.get("value"))
    return value if figure.get("status") == "ok" and value is not None and value > 0 else None


def comparable(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return (a.get("unit"), a.get("method")) == (b.get("unit"), b.get("method"))


def within_sigma(figure: dict[str, Any] | None) -> float:
    """The spread between one run's batches, as σ on the log scale."""
    low, high = number(as_dict(figure).get("p10")), number(as_dict(figure).get("p90"))
    if low is None or high is None or low <= 0 or high < low:
        return 0.0
    return math.log(high / low) / _Z90


def history_sigma(values: list[float]) -> float | None:
    if len(values) < MIN_HISTORY:
        return None
    logs = [math.log(v) for v in values]
    mean = sum(logs) / len(logs)
    return math.sqrt(sum((x - mean) ** 2 for x in logs) / (len(logs) - 1))


@dataclass(frozen=True)
class Verdict:
    reference: float  # the median of the accepted window
    threshold: float  # the drop that counts, as a fraction
    floor: float  # reference x (1 - threshold)
    value: float  # the new figure: the better of its measurement and re-measurement
    sigma: float
    below: bool  # the first measurement fell below the floor
    confirmed: bool  # ... and so did its re-measurement

    @property
    def change(self) -> float:
        """Relative change of the new figure against the reference (−0.23: 23% lower)."""
        return self.value / self.reference - 1.0

    @property
    def drop(self) -> bool:
        return self.below and self.confirmed

    @property
    def rise(self) -> bool:
        return self.value > self.reference * math.exp(SIGMAS * self.sigma) and self.change > MIN_DROP


def threshold(window: list[float], kind: str, *spreads: dict[str, Any] | None) -> tuple[float, float]:
    """(σ, the drop fraction that counts) for a figure of ``kind`` with this history."""
    sigma = history_sigma(window)
    sigma = max([NOISE_FLOOR.get(kind, NOISE_FLOOR["gpu"]) if sigma is None else sigma,
                 *(within_sigma(s) for s in spreads)])
    return sigma, max(MIN_DROP, 1.0 - math.exp(-SIGMAS * sigma))


def judge(window: list[float], kind: str, old: dict[str, Any] | None, new: dict[str, Any]) -> Verdict | None:
    """The new figure against the accepted ``window`` (None: nothing to compare with)."""
    value = measured(new)
    if not window or value is None:
        return None
    reference = median(window)
    sigma, drop = threshold(window, kind, old, new)
    floor = reference * (1.0 - drop)
    again = number(new.get("remeasured"))
    best = max(value, again) if again is not None else value
    return Verdict(reference, drop, floor, best, sigma, value < floor, again is not None and again < floor)


def window(facts: dict[str, Any], key: str) -> list[float]:
    """The accepted values a snapshot holds for ``key``: its history, else its own figure."""
    entry = as_dict(as_dict(facts.get("history")).get(key))
    values = [v for v in entry.get("values") or [] if number(v) is not None and v > 0]
    if values:
        return values
    own = measured(figures(facts).get(key) or {})
    return [own] if own is not None else []


def floors(previous: dict[str, Any]) -> dict[str, float]:
    """Per key, the value below which this run measures a figure again: the previous
    snapshot's floor (only for the same probe version)."""
    if previous.get("version") != VERSION:
        return {}
    found = {}
    for key, figure in figures(previous).items():
        values = window(previous, key)
        if values:
            _, drop = threshold(values, kind_of(key), figure)
            found[key] = round(median(values) * (1.0 - drop), 6)
    return found


CPU_CONTEXT = ("backend", "numpy", "blas", "python", "cpu_model", "cpus")


def context_of(facts: dict[str, Any], key: str) -> Any:
    """What a figure's software depends on: numpy and its BLAS for the CPU, the GPU stack
    (driver, torch, CUDA, cuBLAS, NCCL) for the GPUs."""
    if kind_of(key) == "cpu":
        cpu = as_dict(facts.get("cpu"))
        return tuple(cpu.get(k) for k in CPU_CONTEXT)
    return as_dict(facts.get("gpu")).get("context")


def carry(previous: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """The history the new snapshot holds: per figure, the accepted values of this host's
    runs with the same method and software (this one's too, unless it is a confirmed drop),
    at most ``WINDOW``. A drop that holds for ``NEW_LEVEL`` runs in a row becomes the
    reference (the level after a change the host keeps); another version, method or
    software stack starts afresh."""
    same_version = previous.get("version") == VERSION
    before, old_figures = as_dict(previous.get("history")), figures(previous)
    history: dict[str, Any] = {}
    for key, figure in figures(new).items():
        old = old_figures.get(key) if same_version else None
        if old is not None and (not comparable(old, figure) or context_of(previous, key) != context_of(new, key)):
            old = None
        entry = as_dict(before.get(key)) if old is not None else {}
        values = [float(v) for v in entry.get("values") or [] if number(v)]
        if not values and old is not None and measured(old) is not None:
            values = [measured(old)]  # type: ignore[list-item]
        pending = [float(v) for v in entry.get("pending") or [] if number(v)]
        value = measured(figure)
        if value is not None:
            verdict = judge(values, kind_of(key), old, figure)
            if verdict is not None and verdict.drop:
                pending.append(verdict.value)
                if len(pending) >= NEW_LEVEL:
                    values, pending = pending, []
            else:
                values, pending = values + [verdict.value if verdict else value], []
        if values:
            history[key] = {"unit": figure.get("unit"), "method": figure.get("method"),
                            "values": [round(v, 6) for v in values[-WINDOW:]], "pending": [round(v, 6) for v in pending]}
    return history


def drop_severity(drop: float) -> Severity:
    if drop >= 0.5:
        return Severity.critical
    if drop >= 0.2:
        return Severity.high
    return Severity.medium if drop >= 0.1 else Severity.low


# -- the judges that need no history: one host's GPUs, a fleet, the physical limits ----


SIBLING_DROP = 0.05  # a GPU this far below its siblings' median
FLEET_Z, FLEET_DROP = -3.5, 0.05  # robust z-score, and this far below the fleet's median
_MAD_SIGMA = 0.6745  # MAD of a normal distribution, in σ (Iglewicz and Hoaglin's modified z)


@dataclass(frozen=True)
class Outlier:
    value: float
    median: float
    z: float | None = None  # the robust z-score (fleet)

    @property
    def below(self) -> float:
        return 1.0 - self.value / self.median


def below_siblings(values: dict[str, float]) -> dict[str, Outlier]:
    """GPUs more than 5% below the median of the other GPUs of the same host (and model)."""
    found = {}
    for gpu, value in values.items():
        others = [v for g, v in values.items() if g != gpu]
        if not others:
            continue
        middle = median(others)
        if middle > 0 and value < middle * (1 - SIBLING_DROP):
            found[gpu] = Outlier(value, middle)
    return found


def fleet_outliers(values: dict[str, float]) -> dict[str, Outlier]:
    """Hosts whose figure is an odd one out below the fleet: robust z < −3.5 (median and
    MAD, Iglewicz and Hoaglin) and more than 5% below the median. Three hosts at least."""
    if len(values) < 3:
        return {}
    middle = median(values.values())
    mad = median(abs(v - middle) for v in values.values())
    found = {}
    for host, value in values.items():
        if middle <= 0 or value >= middle * (1 - FLEET_DROP):
            continue
        z = _MAD_SIGMA * (value - middle) / mad if mad > 0 else -math.inf
        if z < FLEET_Z:
            found[host] = Outlier(value, middle, z)
    return found


def below_limit(value: float, limit: float, ratio: float) -> bool:
    """A figure below ``ratio`` of a published limit (bf16 GEMM below 0.6 of the peak)."""
    return limit > 0 and value < ratio * limit
