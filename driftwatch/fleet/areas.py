"""Fleet facts of the host's stack: system, GPUs, the CUDA stack, Python distributions.

Severities follow the diff's judgement of the same fields: the driver is critical; the
kernel, GPU model/count/memory/PCIe width, CUDA toolkit, NCCL and torch build are high;
packages the user focuses on are high, the rest low.
"""

from __future__ import annotations

from typing import Any

from driftwatch.diff.change import Severity
from driftwatch.facts.read import as_dict
from driftwatch.fleet.facts import (
    IDENTITY_KEYS,
    Area,
    Fact,
    FactMap,
    HostView,
    freeze,
    is_focus,
    walk,
)
from driftwatch.fleet.containers import CONTAINER_AREAS
from driftwatch.fleet.canary import CANARY_AREAS
from driftwatch.fleet.engine import ENGINE_AREAS
from driftwatch.fleet.gpus import gpu_facts
from driftwatch.fleet.libraries import LIBRARY_AREAS
from driftwatch.fleet.perf import perf_area
from driftwatch.fleet.runtime import RUNTIME_AREAS
from driftwatch.fleet.stack import STACK_AREAS
from driftwatch.model import VOLATILE_KEY

_SYSTEM: dict[str, tuple[Severity, str]] = {
    "kernel": (Severity.high, "kernel"),
    "os_release": (Severity.medium, "OS"),
    "memlock": (Severity.medium, "memlock limit"),
    "shm_bytes": (Severity.medium, "/dev/shm size (bytes)"),
}


def system_facts(facts: dict[str, Any], view: HostView) -> tuple[FactMap, frozenset[str]]:
    out: FactMap = {}
    for key, (severity, label) in _SYSTEM.items():
        if key in facts:
            out[f"system.{key}"] = Fact("system", "system", key, label, freeze(facts[key]), severity)
    for module, version in as_dict(facts.get("nvidia_modules")).items():
        # A loaded module's version is the driver the kernel really runs.
        out[f"system.nvidia_modules[{module}]"] = Fact(
            "system", "driver", module, f"kernel module {module}", freeze(version), Severity.high
        )
    return out, frozenset(_SYSTEM) | {"nvidia_modules"} | IDENTITY_KEYS


def cuda_facts(facts: dict[str, Any], view: HostView) -> tuple[FactMap, frozenset[str]]:
    out: FactMap = {}
    nccl = as_dict(facts.get("nccl"))
    for name, version in as_dict(nccl.get("distributions")).items():
        out[f"cuda.nccl[{name}]"] = Fact("cuda", "nccl", name, name, freeze(version), Severity.high)
    if nccl.get("system") is not None:
        # Library paths carry the version; the set of versions is what a job can load.
        libs = as_dict(nccl.get("system"))
        versions = tuple(sorted({str(v or str(p).rsplit("/", 1)[-1]) for p, v in libs.items()}))
        out["cuda.nccl.system"] = Fact("cuda", "nccl", "libnccl (system)", "system libnccl", versions or None, Severity.high)
    for key, torch in as_dict(facts.get("torch")).items():
        label, t = view.interpreters.get(key, key), as_dict(torch)
        base = f"cuda.torch[{label}]"
        if t.get("error"):
            out[base] = Fact("cuda", "cuda", "torch", f"torch build ({label})", f"error: {t['error']}", Severity.low)
            continue
        # Item "torch", like the python probe's, so one version split is reported once.
        out[base] = Fact("cuda", "cuda", "torch", "torch", freeze(t.get("version")), Severity.high)
        out[f"{base}.cuda"] = Fact("cuda", "cuda", f"torch ({label})", "torch built for CUDA",
                                   freeze(t.get("cuda")), Severity.high, within=base)
        out[f"{base}.git_version"] = Fact("cuda", "cuda", f"torch ({label})", "torch build commit",
                                          freeze(t.get("git_version")), Severity.high, within=base,
                                          why=" (same version, different build)")
    toolkit = as_dict(facts.get("toolkit"))
    for key, label in (("nvcc", "CUDA toolkit (nvcc)"), ("cuda_link", "/usr/local/cuda target")):
        if key in toolkit:
            item = "nvcc" if key == "nvcc" else "/usr/local/cuda"
            out[f"cuda.toolkit.{key}"] = Fact("cuda", "cuda", item, label, freeze(toolkit[key]), Severity.high)
    for name, version in as_dict(facts.get("cudnn")).items():
        out[f"cuda.cudnn[{name}]"] = Fact("cuda", "cuda", name, name, freeze(version), Severity.high)
    return out, frozenset({"nccl", "torch", "toolkit", "cudnn"})


def python_facts(facts: dict[str, Any], view: HostView) -> tuple[FactMap, frozenset[str]]:
    out: FactMap = {}
    for key, interp in as_dict(facts.get("interpreters")).items():
        entry, label = as_dict(interp), view.interpreters.get(key, key)
        base = f"python[{label}]"
        error = entry.get("error")
        out[base] = Fact("python", "python", label, f"interpreter {label}", f"error: {error}" if error else "ok", Severity.medium)
        if error:
            continue
        out[f"{base}.version"] = Fact("python", "python", label, f"{label} Python version",
                                      freeze(entry.get("version")), Severity.medium, within=base)
        if not view.interpreters_by_position:  # else the paths differ by configuration
            for key2 in ("executable", "prefix"):
                out[f"{base}.{key2}"] = Fact("python", "python", label, f"{label} {key2}",
                                             freeze(entry.get(key2)), Severity.medium, within=base)
        prefix = str(entry.get("prefix") or "")
        for name, dist in as_dict(entry.get("distributions")).items():
            out.update(_distribution(base, str(name), as_dict(dist), prefix, view))
    return out, frozenset({"interpreters"})


def python_content(facts: dict[str, Any]) -> Any:
    """Everything ``python_facts`` reads, cheaply (gather.py digests it for thousands of hosts):
    every field of every interpreter and distribution but identities (install times)."""
    drop = IDENTITY_KEYS | {VOLATILE_KEY}
    out = []
    for key, interp in as_dict(facts.get("interpreters")).items():
        entry = as_dict(interp)
        dists = [(name, [kv for kv in d.items() if kv[0] not in drop] if type(d) is dict else repr(d))
                 for name, d in as_dict(entry.get("distributions")).items()]
        out.append((key, [kv for kv in entry.items() if kv[0] != "distributions" and kv[0] not in drop], dists))
    return out, [(k, v) for k, v in facts.items() if k != "interpreters"]


def _distribution(base: str, name: str, dist: dict[str, Any], prefix: str, view: HostView) -> FactMap:
    focus = is_focus(name, view)
    severity = Severity.high if focus else Severity.low
    path = f"{base}.dist[{name}]"
    out = {path: Fact("python", "package", name, name, freeze(dist.get("version")), severity, within=base, focus=focus)}
    skip = {"name", "version", "location", "direct_url"} | IDENTITY_KEYS
    if dist.get("editable"):
        # An editable install's RECORD lists a .pth holding its source path, which differs
        # wherever the checkout lives; its code is compared by source_commit instead.
        skip.add("record_sha256")
    rest = {k: v for k, v in dist.items() if k not in skip}
    # Paths under the interpreter's prefix are compared relative to it.
    rest["location"] = _relative(dist.get("location"), prefix)
    rest["direct_url"] = _relative(dist.get("direct_url"), prefix)
    for keys, value in walk(rest):
        field = ".".join(keys)
        why = " (same version, different build: reinstalled or rebuilt)" if field == "record_sha256" else ""
        out[f"{path}.{field}"] = Fact("python", "package", name, f"{name} {field}", value,
                                      severity, within=path, focus=focus, why=why)
    return out


def _relative(value: Any, prefix: str) -> Any:
    if isinstance(value, str) and len(prefix) > 1 and prefix in value:
        return value.replace(prefix, "<prefix>")
    return value


AREAS: dict[str, Area] = {
    "system": system_facts,
    "gpu": gpu_facts,
    "cuda": cuda_facts,
    "python": python_facts,
    **RUNTIME_AREAS,
    **STACK_AREAS,
    **LIBRARY_AREAS,
    **CONTAINER_AREAS,
    "perf": perf_area,
    **CANARY_AREAS,
    **ENGINE_AREAS,
}

# Areas whose facts name interpreters by the fleet's labels (``view.interpreters``, from
# every host's interpreters: flatten.interpreter_labels): gather.py flattens them once the
# whole fleet is known. tests/fleet/test_gather.py checks that no other area reads them.
FLEET_VIEW_AREAS = frozenset({"python", "cuda", "libraries"})
