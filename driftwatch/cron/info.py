"""The labels of ``driftwatch_info``: what a host runs, for fleet queries in Prometheus.

Prometheus is the fleet's query and alerting engine (``count by (nccl) (driftwatch_info)``
names the odd host), so every label is low-churn: a version or a model name that changes
only when someone changes the host, never a time, a path, a reading or an identity, so
the number of series stays that of the hosts. Each value is shown with ``clean`` and cut
at ``MAX_VALUE`` characters; unknown (a failed probe, a package not installed) is "",
which Prometheus treats as no label at all.
"""

from __future__ import annotations

from typing import Any

from driftwatch.facts.read import as_dict, ok_facts
from driftwatch.model import Snapshot
from driftwatch.report.safe import clean

INFO_LABELS = (
    "driver", "cuda", "torch", "nccl", "sglang", "sgl_kernel", "vllm", "flashinfer", "gpu_model", "gpu_count",
    "image_id",
)  # fmt: skip
MAX_VALUE = 64

# Label → the distributions that are it, first found wins (normalized names).
PACKAGES = {
    "torch": ("torch",),
    "sglang": ("sglang",),
    "sgl_kernel": ("sgl-kernel", "sglang-kernel"),
    "vllm": ("vllm",),
    "flashinfer": ("flashinfer-python", "flashinfer"),
}


def info_labels(snapshot: Snapshot) -> dict[str, str]:
    """Every label of ``INFO_LABELS``, "" where unknown."""
    gpu, cuda = ok_facts(snapshot, "gpu"), ok_facts(snapshot, "cuda")
    gpus = [as_dict(g) for g in as_dict(gpu.get("gpus")).values()]
    nccl = as_dict(cuda.get("nccl"))
    values: dict[str, Any] = {
        "driver": gpu.get("driver_version"),
        # What the kernels run with: torch's CUDA (the wheels bring their runtime), else the toolkit's.
        "cuda": _first(t.get("cuda") for t in _readable(cuda.get("torch"))) or as_dict(cuda.get("toolkit")).get("nvcc"),
        # NCCL as a job loads it: the nvidia-nccl wheel, else the system's libnccl.
        "nccl": _first(v for _, v in sorted(as_dict(nccl.get("distributions")).items()))
        or _joined(as_dict(nccl.get("system")).values()),
        "gpu_model": _joined(g.get("name") for g in gpus),
        "gpu_count": len(gpus) if "gpus" in gpu else None,
    }
    distributions = _distributions(snapshot)
    inside = _container_distributions(snapshot)
    for label, names in PACKAGES.items():
        values[label] = _first(as_dict(distributions.get(name)).get("version") for name in names) or _first(
            as_dict(inside.get(name)).get("version") for name in names)
    values["image_id"] = _joined(_short_image(s) for s in _containers(snapshot))
    return {label: _shown(values.get(label)) for label in INFO_LABELS}


def _distributions(snapshot: Snapshot) -> dict[str, Any]:
    """The interpreters' distributions, the first configured interpreter's winning."""
    merged: dict[str, Any] = {}
    for interpreter in _readable(ok_facts(snapshot, "python").get("interpreters")):
        for name, dist in as_dict(interpreter.get("distributions")).items():
            merged.setdefault(name, dist)
    return merged


def _containers(snapshot: Snapshot) -> list[dict[str, Any]]:
    servers = as_dict(ok_facts(snapshot, "containers").get("servers")).values()
    return [as_dict(s) for s in servers if isinstance(as_dict(s).get("container"), dict)]


def _container_distributions(snapshot: Snapshot) -> dict[str, Any]:
    """What the containerised servers run, where the host's own interpreters have none of it."""
    merged: dict[str, Any] = {}
    for server in _containers(snapshot):
        python = as_dict(server.get("python"))
        for name, dist in as_dict(python.get("distributions")).items() if not python.get("error") else ():
            merged.setdefault(name, dist)
    return merged


def _short_image(server: dict[str, Any]) -> str | None:
    """An image id cut to 12 hex digits (as ``docker images`` prints it): low-churn, bounded."""
    image_id = as_dict(as_dict(server.get("container")).get("image")).get("id")
    if not isinstance(image_id, str):
        return None
    return image_id.rpartition(":")[2][:12] or None


def _readable(per_interpreter: Any) -> list[dict[str, Any]]:
    """Per-interpreter facts in configured order, up to the first that could not be read:
    what it holds is unknown, and it may hide what the later ones hold."""
    found = []
    for entry in as_dict(per_interpreter).values():
        if not isinstance(entry, dict) or entry.get("error"):
            break
        found.append(entry)
    return found


def _first(values: Any) -> Any:
    return next((v for v in values if v not in (None, "")), None)


def _joined(values: Any) -> str:
    """One value, or the distinct ones sorted (two GPU models in one host is worth seeing)."""
    return ",".join(sorted({str(v) for v in values if v not in (None, "")}))


def _shown(value: Any) -> str:
    if value is None:
        return ""
    text = clean(value)
    return text if len(text) <= MAX_VALUE else text[: MAX_VALUE - 1] + "…"
