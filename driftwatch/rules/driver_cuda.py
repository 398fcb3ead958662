"""Driver vs CUDA builds: what torch, the CUDA runtime wheels and kernel packages were
built for, against the CUDA version the installed driver supports.

A build for a newer CUDA *major* than the driver cannot initialise CUDA at all. A newer
*minor* runs only under CUDA's minor-version compatibility: code JIT-compiled from PTX
(Triton kernels, FlashInfer's JIT) and driver APIs newer than the driver fail.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from driftwatch.severity import Severity
from driftwatch.facts.read import as_dict
from driftwatch.rules.finding import Finding, Subject
from driftwatch.facts.names import package_subjects
from driftwatch.rules.host import Host, Missing

CUDA_COMPAT = "https://docs.nvidia.com/deploy/cuda-compatibility/"
GREEN_CONTEXTS = "https://github.com/sgl-project/sglang/issues/8432"
DRIVER_SUBJECTS: tuple[Subject, ...] = (("driver", "driver"), ("driver", "driver CUDA version"))
Cuda = tuple[int, int | None]  # (major, minor); minor None when only the major is known

_LOCAL_CUDA = re.compile(r"\+(?:.*[._-])?cu(\d{2,3})(?![0-9])")
_CUDA_WHEEL = re.compile(r"^nvidia-[a-z0-9-]+?-cu(\d+)$")
# CUDA component wheels whose version is the CUDA release they belong to (12.8.90 → 12.8).
_RUNTIME_WHEELS = re.compile(r"^nvidia-(cuda-runtime|cuda-nvrtc|cuda-cupti|cuda-nvcc|nvjitlink|cublas)(-cu\d+)?$")
GREEN_CONTEXT_CUDA: Cuda = (12, 4)
GREEN_CONTEXT_PACKAGES = ("sgl-kernel", "sglang-kernel")


@dataclass(frozen=True)
class Build:
    what: str  # "torch 2.8.0+cu128", "nvidia-cuda-runtime-cu12 12.8.90"
    cuda: Cuda
    subjects: tuple[Subject, ...]


def driver_below_builds(host: Host) -> list[Finding]:
    driver_version, driver_cuda = _driver(host)
    builds = _builds(host)
    findings = []
    for interp, group in builds.items():
        behind = [b for b in group if _newer(b.cuda, driver_cuda)]
        if not behind:
            continue
        major = any(b.cuda[0] > driver_cuda[0] for b in behind)
        need = max(behind, key=lambda b: (b.cuda[0], b.cuda[1] or 0)).cuda
        where = f" in {interp}" if len(builds) > 1 else ""
        named = ", ".join(f"{b.what} (CUDA {_text(b.cuda)})" for b in behind[:4])
        more = f" and {len(behind) - 4} more" if len(behind) > 4 else ""
        if major:
            effect = "CUDA cannot initialise (torch: 'The NVIDIA driver on your system is too old')"
        else:
            effect = (
                "it runs only under CUDA minor-version compatibility: kernels JIT-compiled from PTX "
                "(Triton, FlashInfer) fail with 'the provided PTX was compiled with an unsupported "
                "toolchain', and driver APIs newer than the driver are missing"
            )
        findings.append(Finding(
            severity=Severity.critical if major else Severity.high,
            why=f"the driver {driver_version} supports CUDA {_text(driver_cuda)}, but {named}{more}{where} "
                f"need{'s' if len(behind) == 1 and not more else ''} a newer one: {effect}",
            fix=f"upgrade the NVIDIA driver to one for CUDA {_text(need)} or newer, "
                f"or install builds for CUDA {_text(driver_cuda)} or older",
            reference=CUDA_COMPAT,
            subjects=DRIVER_SUBJECTS + tuple(s for b in behind for s in b.subjects),
            key=interp,
        ))
    return findings


def green_contexts(host: Host) -> list[Finding]:
    """sgl-kernel calls the driver's green-context API (CUDA 12.4+): on an older driver
    ``import sgl_kernel`` fails with ``undefined symbol: cuGreenCtxDestroy``."""
    driver_version, driver_cuda = _driver(host)
    if not _newer(GREEN_CONTEXT_CUDA, driver_cuda):
        return []
    found = sorted({(name, str(dist.get("version"))) for _, name, dist in host.distributions()
                    if name in GREEN_CONTEXT_PACKAGES})
    return [
        Finding(
            severity=Severity.high,
            why=f"{name} {version} uses the driver's green-context API (cuGreenCtx*, CUDA 12.4+), but the "
                f"driver {driver_version} supports CUDA {_text(driver_cuda)}: builds that link it fail to "
                "import with `undefined symbol: cuGreenCtxDestroy`",
            fix="upgrade the NVIDIA driver to one for CUDA 12.4 or newer (R550+); a newer toolkit does not help",
            reference=GREEN_CONTEXTS,
            subjects=(*DRIVER_SUBJECTS, ("package", name)),
            key=name,
        )
        for name, version in found
    ]


def _driver(host: Host) -> tuple[str, Cuda]:
    gpu = host.gpu()
    cuda = parse_cuda(gpu.get("cuda_version"))
    if cuda is None:
        raise Missing("nvidia-smi did not report the CUDA version the driver supports")
    return str(gpu.get("driver_version") or "(version unknown)"), cuda


def _builds(host: Host) -> dict[str, list[Build]]:
    """Per interpreter: torch's build, packages whose version names a CUDA (+cu128), and
    the CUDA runtime wheels."""
    builds: dict[str, list[Build]] = {}
    torch_known = set()
    cuda_facts = as_dict(host.facts("cuda").get("torch")) if host.has("cuda") else {}
    for interp, torch in cuda_facts.items():
        torch = as_dict(torch)
        cuda = parse_cuda(torch.get("cuda"))
        if cuda is not None and not torch.get("error"):
            torch_known.add(interp)
            subjects = (("cuda", f"torch ({interp})"), ("package", "torch"))
            builds.setdefault(interp, []).append(Build(f"torch {torch.get('version')}", cuda, subjects))
    for interp, name, dist in _distributions(host):
        build = _build(name, str(dist.get("version")))
        if build is not None and not (name == "torch" and interp in torch_known):
            builds.setdefault(interp, []).append(build)
    if not builds and not host.has("cuda") and not host.has("python"):
        raise Missing("neither the cuda nor the python probe's facts are in this snapshot")
    return builds


def _distributions(host: Host) -> Iterator[tuple[str, str, dict]]:
    try:
        yield from host.distributions()
    except Missing:
        return


def _build(name: str, version: str) -> Build | None:
    subjects = package_subjects(name)
    local = _LOCAL_CUDA.search(version)
    if local:
        return Build(f"{name} {version}", _cu_tag(local.group(1)), subjects)
    if _RUNTIME_WHEELS.match(name):
        cuda = parse_cuda(version)
        return Build(f"{name} {version}", cuda, subjects) if cuda else None
    wheel = _CUDA_WHEEL.match(name)
    if wheel:
        return Build(f"{name} {version}", (int(wheel.group(1)), None), subjects)
    return None


def parse_cuda(value: object) -> Cuda | None:
    """'12.8' → (12, 8); '13' → (13, None); anything else → None."""
    if not isinstance(value, str):
        return None
    match = re.match(r"^(\d+)(?:\.(\d+))?", value.strip())
    if not match:
        return None
    return int(match.group(1)), int(match.group(2)) if match.group(2) is not None else None


def _cu_tag(digits: str) -> Cuda:
    return int(digits[:-1]), int(digits[-1])  # cu128 → 12.8, cu118 → 11.8, cu92 → 9.2


def _newer(build: Cuda, driver: Cuda) -> bool:
    if build[0] != driver[0] or build[1] is None or driver[1] is None:
        return build[0] > driver[0]
    return build[1] > driver[1]


def _text(cuda: Cuda) -> str:
    return f"{cuda[0]}" if cuda[1] is None else f"{cuda[0]}.{cuda[1]}"
