"""The CUDA stack below the packages: NCCL, the toolkit, cuDNN, what torch was built for.

Every change here is high: kernels, collectives and their memory use depend on it, and
none of it shows in the application's source.
"""

from __future__ import annotations

from typing import Any

from driftwatch.facts import fmt
from driftwatch.diff.change import Change, Severity
from driftwatch.diff.context import DiffContext
from driftwatch.facts.read import Facts, as_dict
from driftwatch.diff.generic import changed_keys

KEYS = frozenset({"nccl", "torch", "toolkit", "cudnn"})


def diff_cuda(old: Facts, new: Facts, ctx: DiffContext) -> list[Change]:
    old_nccl, new_nccl = as_dict(old.get("nccl")), as_dict(new.get("nccl"))
    # Wheels are gathered over the interpreters that could be read: with a different set
    # on each side, a wheel of an unread interpreter would read as "absent".
    wheels = unread(old) == unread(new)
    return [
        *(_versions(
            "nccl",
            "NCCL",
            as_dict(old_nccl.get("distributions")),
            as_dict(new_nccl.get("distributions")),
            "collectives, their memory use and their bugs may differ",
        ) if wheels else []),
        *_system_nccl(as_dict(old_nccl.get("system")), as_dict(new_nccl.get("system"))),
        *_torch(as_dict(old.get("torch")), as_dict(new.get("torch"))),
        *_toolkit(as_dict(old.get("toolkit")), as_dict(new.get("toolkit"))),
        *(_versions(
            "cuda",
            "cuDNN",
            as_dict(old.get("cudnn")),
            as_dict(new.get("cudnn")),
            "convolution and attention kernels may differ",
        ) if wheels else []),
    ]


def unread(facts: Facts) -> frozenset[str]:
    """Interpreters whose wheels could not be read in this snapshot."""
    return frozenset(name for name, entry in as_dict(facts.get("torch")).items() if as_dict(entry).get("error"))


def _versions(category: str, what: str, old: Facts, new: Facts, why: str) -> list[Change]:
    changes = []
    for name in changed_keys(old, new):
        o, n = old.get(name), new.get(name)
        text = f"{what} ({name}) {_ver(o)} → {_ver(n)}: {why}"
        changes.append(Change(category, name, o, n, Severity.high, text, magnitude=2.0))
    return changes


def _system_nccl(old: Facts, new: Facts) -> list[Change]:
    # Library files are keyed by path and the path holds the version, so an upgrade is
    # one path gone and one new: compare the set of versions instead.
    old_versions, new_versions = _lib_versions(old), _lib_versions(new)
    if old_versions == new_versions:
        return []
    o, n = ", ".join(old_versions) or None, ", ".join(new_versions) or None
    paths = ", ".join(sorted(new)) or "none left"
    text = (
        f"system libnccl {_ver(o)} → {_ver(n)} ({fmt.value(paths)}): "
        "a process that loads the system NCCL gets a different one"
    )
    return [Change("nccl", "libnccl (system)", o, n, Severity.high, text, magnitude=2.0)]


def _lib_versions(libs: Facts) -> list[str]:
    # A file name without a readable version still counts, by its name.
    return sorted({str(v) if v else str(path).rsplit("/", 1)[-1] for path, v in libs.items()})


def _torch(old: Facts, new: Facts) -> list[Change]:
    changes = []
    for interp in changed_keys(old, new):
        o, n = as_dict(old.get(interp)), as_dict(new.get(interp))
        item = f"torch ({interp})"
        if o.get("error") or n.get("error"):
            # Unknown is not "no torch": say the build could not be read, compare nothing.
            changes += [_torch_unreadable(interp, o.get("error"), n.get("error"))]
        elif o.get("cuda") != n.get("cuda"):
            text = (
                f"torch in {interp} is now built for CUDA {_ver(n.get('cuda'))} "
                f"(was {_ver(o.get('cuda'))}): extensions built for the old CUDA may fail to load"
            )
            changes.append(
                Change(
                    "cuda", item, o.get("cuda"), n.get("cuda"), Severity.high, text, magnitude=2.5
                )
            )
        elif o.get("version") == n.get("version") and o.get("git_version") != n.get("git_version"):
            # The version change itself is reported by the python probe; a rebuild is not.
            text = (
                f"torch {n.get('version')} in {interp} rebuilt from a different commit "
                "with the same version"
            )
            ov, nv = fmt.short(o.get("git_version"), 12), fmt.short(n.get("git_version"), 12)
            changes.append(Change("cuda", item, ov, nv, Severity.high, text, magnitude=1.0))
    return changes


def _torch_unreadable(interp: str, old_error: Any, new_error: Any) -> Change:
    if new_error and not old_error:
        text = f"torch build in {interp} could not be read: {fmt.value(new_error)}"
        severity = Severity.low
    else:
        text = f"torch build in {interp} is readable again (was: {fmt.value(old_error)})"
        severity = Severity.info
    return Change("cuda", f"torch ({interp})", old_error, new_error, severity, text)


def _toolkit(old: Facts, new: Facts) -> list[Change]:
    changes = []
    if old.get("nvcc") != new.get("nvcc"):
        text = (
            f"CUDA toolkit (nvcc) {_ver(old.get('nvcc'))} → {_ver(new.get('nvcc'))}: "
            "JIT-compiled kernels are built differently"
        )
        changes.append(
            Change(
                "cuda", "nvcc", old.get("nvcc"), new.get("nvcc"), Severity.high, text, magnitude=2.0
            )
        )
    if old.get("cuda_link") != new.get("cuda_link"):
        o, n = _ver(old.get("cuda_link")), _ver(new.get("cuda_link"))
        text = f"/usr/local/cuda now points to {n} (was {o})"
        changes.append(
            Change(
                "cuda",
                "/usr/local/cuda",
                old.get("cuda_link"),
                new.get("cuda_link"),
                Severity.high,
                text,
                magnitude=2.0,
            )
        )
    return changes


def _ver(v: Any) -> str:
    return "absent" if v is None else fmt.value(v)
