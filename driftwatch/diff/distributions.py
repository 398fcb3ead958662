"""One distribution's change: the single most telling thing that happened to it."""

from __future__ import annotations

import re
from typing import Any

from driftwatch.facts import fmt
from driftwatch.diff.change import Change, Severity
from driftwatch.diff.context import DiffContext
from driftwatch.facts.read import Facts, as_dict, normalize_name
from driftwatch.diff.versions import step

# Why a change to a well-known package matters, in one clause.
HINTS = {
    "sglang": "the SGLang server itself changed",
    "sgl-kernel": "SGLang's CUDA kernels changed",
    "sglang-kernel": "SGLang's CUDA kernels changed",
    "torch": "PyTorch changed, and every compiled extension (sgl-kernel, flashinfer) must match it",
    "flashinfer-python": "FlashInfer's attention kernels changed",
    "triton": "the Triton compiler changed, so JIT kernels are recompiled",
    "transformers": "model loading and config parsing changed",
    "vllm": "the vLLM server itself changed",
    "nvidia-nccl-cu12": "NCCL changed: collectives and their memory use may differ",
    "nvidia-nccl-cu13": "NCCL changed: collectives and their memory use may differ",
}
KERNEL_PACKAGES = {"sgl-kernel": "sglang", "sglang-kernel": "sglang"}  # kernels → their server


def describe_distribution(
    name: str,
    old: Facts | None,
    new: Facts | None,
    old_all: Facts,
    new_all: Facts,
    ctx: DiffContext,
    where: str,
) -> Change:
    focus = name in ctx.focus
    context = False
    if old is None or new is None:
        base, severity, old_v, new_v, magnitude = _presence(name, old, new, focus, where)
    elif old.get("version") != new.get("version"):
        base, severity, magnitude = _version_change(name, old, new, focus, where)
        old_v, new_v = old.get("version"), new.get("version")
    else:
        base, severity, old_v, new_v = _same_version(name, old, new, focus, where)
        context = identical_reinstall(old, new)
        magnitude = 0.5
    # Hints say why a change matters, so only for changes that can matter.
    hint = (
        _hint(name, old_all, new_all, old, new) if severity.rank >= Severity.medium.rank else None
    )
    # Broken requirements are the rules' findings (rules/requirements.py), said on this line
    # by explain/known_bad.py when this change produced them.
    text = base + (": " + hint if hint else "")
    if old is not None and new is not None and not context:
        text += pulled_in_by(name, old_all, new_all, new)
    return Change("package", name, old_v, new_v, severity, text, magnitude=magnitude, focus=focus, context=context)


# One pip run writes every distribution it installs within seconds of each other.
SAME_INSTALL_S = 120.0


def pulled_in_by(name: str, old_all: Facts, new_all: Facts, new: Facts) -> str:
    """``; installed with vllm 0.9.0 → 0.10.1, whose requirement torch==2.8.0 pulled it in``:
    a package that moved in the same install as another that changed and requires it moved
    as a dependency, not because anyone named it. Empty when no such requirer exists."""
    at = fmt.number(new.get("installed_at"))
    if at is None:
        return ""
    for other, facts in sorted(new_all.items()):
        facts, before = as_dict(facts), as_dict(old_all.get(other))
        other_at = fmt.number(facts.get("installed_at"))
        if other == name or not before or before == facts or other_at is None or abs(other_at - at) > SAME_INSTALL_S:
            continue
        wanted = _requirement_on(name, facts.get("requires"))
        if wanted:
            moved = (f"{fmt.value(before.get('version'))} → {fmt.value(facts.get('version'))}"
                    if before.get("version") != facts.get("version") else f"{fmt.value(facts.get('version'))} reinstalled")
            return f"; installed with {other} {moved}, whose requirement {wanted} pulled it in"
    return ""


def _requirement_on(name: str, requires: Any) -> str:
    for text in requires if isinstance(requires, list) else []:
        spelled = str(text).split(";", 1)[0].strip()
        head = re.split(r"[\s\[<>=!~(]", spelled, maxsplit=1)[0]
        if head and normalize_name(head) == name:
            return spelled
    return ""


def identical_reinstall(old: Facts, new: Facts) -> bool:
    """Only the install time moved and RECORD (every file's hash) is the same: the files on
    disk are the ones of the baseline, whatever happened in between (a reinstall, an
    upgrade and a downgrade back). Context, not drift."""
    moved = {k for k in old.keys() | new.keys() if old.get(k) != new.get(k)}
    return moved == {"installed_at"} and bool(old.get("record_sha256"))


def _presence(
    name: str, old: Facts | None, new: Facts | None, focus: bool, where: str
) -> tuple[str, Severity, Any, Any, float]:
    if old is None:
        n = as_dict(new)
        at = fmt.when(n.get("installed_at"))
        text = f"{name} {n.get('version')} newly installed{where}" + (f" at {at}" if at else "")
        return text, Severity.medium if focus else Severity.low, None, n.get("version"), 1.0
    text = f"{name} {old.get('version')} was uninstalled{where}"
    return text, Severity.high if focus else Severity.medium, old.get("version"), None, 1.0


def _version_change(
    name: str, old: Facts, new: Facts, focus: bool, where: str
) -> tuple[str, Severity, float]:
    ov, nv = str(old.get("version")), str(new.get("version"))
    s = step(ov, nv)
    text = f"{name} {ov} → {nv} ({s.text}{_installed(new, ', ')}){where}"
    if focus:
        severity = Severity.high
    elif name.startswith("nvidia-") or s.kind in ("major", "build", "epoch"):
        # CUDA runtime wheels and CUDA-variant rebuilds change what kernels link against.
        severity = Severity.medium
    else:
        severity = Severity.low
    return text, severity, s.magnitude


def _same_version(
    name: str, old: Facts, new: Facts, focus: bool, where: str
) -> tuple[str, Severity, Any, Any]:
    version = new.get("version")
    head = f"{name} {version}{where}"
    high_if_focus = Severity.high if focus else Severity.medium
    if bool(old.get("editable")) != bool(new.get("editable")):
        now = (
            f"an editable install from {new.get('direct_url')}"
            if new.get("editable")
            else "a regular install"
        )
        was = (
            f"editable from {old.get('direct_url')}" if old.get("editable") else "a regular install"
        )
        return f"{head} is now {now} (was {was})", high_if_focus, _origin(old), _origin(new)
    if old.get("source_commit") != new.get("source_commit"):
        o, n = fmt.short(old.get("source_commit")), fmt.short(new.get("source_commit"))
        text = (
            f"{head} is an editable install whose source commit moved {o} → {n}: "
            "the installed code is the working tree, so it changed with it"
        )
        return text, high_if_focus, o, n
    if old.get("direct_url") != new.get("direct_url"):
        text = f"{head} is now installed from {new.get('direct_url')} (was {old.get('direct_url')})"
        return text, Severity.medium, old.get("direct_url"), new.get("direct_url")
    old_rec, new_rec = old.get("record_sha256"), new.get("record_sha256")
    if old_rec != new_rec and old_rec and new_rec:
        text = (
            f"{head} reinstalled or rebuilt with the same version "
            f"(RECORD digest changed{_installed(new, ', ')}): its files may differ"
        )
        severity = Severity.medium if focus else Severity.low
        return (
            text,
            severity,
            f"{version} (RECORD {old_rec[:12]})",
            f"{version} (RECORD {new_rec[:12]})",
        )
    if old.get("installed_at") != new.get("installed_at"):
        if old_rec and old_rec == new_rec:
            text = (
                f"{head} reinstalled with identical files (RECORD unchanged{_installed(new, ', ')})"
            )
            return (text, Severity.info, *fmt.when_pair(old.get("installed_at"), new.get("installed_at")))
        text = (
            f"{head} reinstalled{_installed(new, ', ')}; "
            "no RECORD digest to tell whether its files changed"
        )
        return (text, Severity.low, *fmt.when_pair(old.get("installed_at"), new.get("installed_at")))
    fields = sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))
    text = f"{head} metadata changed: {', '.join(fields)}"
    return text, Severity.low, {k: old.get(k) for k in fields}, {k: new.get(k) for k in fields}


def _hint(
    name: str, old_all: Facts, new_all: Facts, old: Facts | None, new: Facts | None
) -> str | None:
    hint = HINTS.get(name)
    server = KERNEL_PACKAGES.get(name)
    # The classic silent regression: the kernels moved under an unchanged server.
    unchanged_server = (
        server is not None
        and server in old_all
        and as_dict(old_all.get(server)) == as_dict(new_all.get(server))
    )
    if hint and unchanged_server and old is not None and new is not None:
        hint += f" with no change to {'SGLang' if server == 'sglang' else server}'s source"
    return hint


def _installed(dist: Facts, sep: str = ", ") -> str:
    at = fmt.when(dist.get("installed_at"))
    return f"{sep}installed {at}" if at else ""


def _origin(dist: Facts) -> str:
    return f"editable ({dist.get('direct_url')})" if dist.get("editable") else "regular install"
