"""What kind of step a version change is, in the words an engineer uses."""

from __future__ import annotations

from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

# How far a step moves, for ranking within a severity: a major bump outranks a patch.
_RELEASE_KINDS = (("major", 4.0), ("minor", 3.0), ("patch", 2.0))


@dataclass(frozen=True, slots=True)
class Step:
    kind: str  # major, minor, patch, pre-release, post-release, dev, build, epoch, change
    text: str  # "patch upgrade", "local build tag +cu128 → +cu129"
    magnitude: float


def step(old: str, new: str) -> Step:
    try:
        a, b = Version(old), Version(new)
    except InvalidVersion:
        return Step("change", "version changed", 1.0)
    if a == b:  # "2.8" vs "2.8.0": metadata respelled, same version
        return Step("change", "same version, spelled differently", 0.1)
    direction = "upgrade" if b > a else "downgrade"
    if a.epoch != b.epoch:
        return Step("epoch", f"epoch {direction}", 4.0)
    if a.release != b.release:
        kind, magnitude = _release_kind(a.release, b.release)
        return Step(kind, f"{kind} {direction}", magnitude)
    if a.pre != b.pre:
        return Step("pre-release", f"pre-release {direction}", 1.5)
    if a.post != b.post:
        return Step("post-release", f"post-release {direction}", 1.2)
    if a.dev != b.dev:
        return Step("dev", f"dev-release {direction}", 1.0)
    # Only the local label differs: the same upstream version built differently, which
    # for CUDA wheels usually means a different CUDA toolkit (+cu128 → +cu129).
    text = f"local build tag {_local(a)} → {_local(b)}"
    return Step("build", text, 2.5)


def _release_kind(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[str, float]:
    width = max(len(a), len(b))
    a, b = a + (0,) * (width - len(a)), b + (0,) * (width - len(b))
    index = next(i for i in range(width) if a[i] != b[i])
    return _RELEASE_KINDS[min(index, 2)]


def _local(v: Version) -> str:
    return f"+{v.local}" if v.local else "(none)"
