"""Unsatisfied requirements: ``pip check`` over the snapshot, without running pip.

Every installed distribution's ``Requires-Dist`` is evaluated for the target's
interpreter (its Python version; Linux; its machine architecture when known) with
``packaging``. Native extensions built against one torch are named first, with the
consequence: their ops fail to load.

Extras are pip's blind spot (``pip check`` ignores them) and a source of false findings
(``ipython[test]`` pins a pytest nobody installed for ipython). A requirement behind an
extra counts only between two focus packages (``sglang[srt]`` pinning ``sgl-kernel``),
never under a development extra, and only when the dependency is installed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from packaging.markers import Marker, default_environment
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from driftwatch.severity import Severity
from driftwatch.facts.read import Facts, as_dict, normalize_name
from driftwatch.rules.finding import Finding
from driftwatch.facts.names import package_subjects
from driftwatch.rules.host import Host

PIP_CHECK = "https://pip.pypa.io/en/stable/cli/pip_check/"
TORCH_ABI = "https://github.com/sgl-project/sglang/issues/5100"
# Wheels whose native code is compiled against one torch: with another, import fails
# with `undefined symbol` (the C++ ABI of libtorch changes with every release).
TORCH_NATIVE = frozenset({
    "sgl-kernel", "sglang-kernel", "vllm", "xformers", "flashinfer-python", "flashinfer-jit-cache",
    "torchvision", "torchaudio", "flash-attn",
})
# Kernel packages a server calls by the signatures of the build it pins.
KERNELS = frozenset({"sgl-kernel", "sglang-kernel", "flashinfer-python", "flashinfer-jit-cache"})
ARCHES = ("x86_64", "aarch64")
DEV_EXTRAS = frozenset({"test", "tests", "testing", "dev", "develop", "docs", "doc", "lint", "typing", "bench"})
_EXTRA = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")


@dataclass(frozen=True)
class Parsed:
    """What the check needs from one requirement string, parsed once per process."""

    dependency: str  # normalized name
    spelled: str  # name[extras]specifier, as the metadata spells it, without the marker
    specifier: str
    marker: str | None
    marker_extras: tuple[str, ...]  # the extras its marker names
    exact: bool  # pins one version (==)


@dataclass(frozen=True)
class Broken:
    """One requirement of one installed distribution that the environment does not meet."""

    requirer: str  # normalized name
    requirer_version: str
    text: str  # the requirement as its metadata spells it, without the marker
    dependency: str  # normalized name
    specifier: str
    installed: str | None  # the dependency's installed version; None: not installed
    extra: str | None  # the extra it was declared under, if any

    @property
    def sentence(self) -> str:
        have = f"{self.installed} is installed" if self.installed is not None else "it is not installed"
        extra = f" (extra [{self.extra}])" if self.extra else ""
        return f"{self.requirer} {self.requirer_version} requires {self.text}{extra}, but {have}"


def unmet_requirements(host: Host) -> list[Finding]:
    arch = host.arch()
    interpreters = host.interpreters()
    findings: dict[str, Finding] = {}
    missing: dict[tuple[str, str], list[tuple[Broken, Finding]]] = {}
    for interp, facts in interpreters.items():
        dists = as_dict(facts.get("distributions"))
        where = f" in {interp}" if len(interpreters) > 1 else ""
        for broken in broken_requirements(dists, facts.get("version"), arch, host.options.focus):
            finding = _finding(host, interp, where, broken, dists)
            if broken.installed is None and finding.reference == PIP_CHECK:
                missing.setdefault((interp, where), []).append((broken, finding))
            else:
                findings.setdefault(finding.key, finding)  # one per (requirer, dependency)
    for (interp, where), group in missing.items():
        for requirer in dict.fromkeys(b.requirer for b, _ in group):
            found = _missing(interp, where, [(b, f) for b, f in group if b.requirer == requirer])
            findings.setdefault(found.key, found)
    return list(findings.values())


def _missing(interp: str, where: str, group: list[tuple[Broken, Finding]]) -> Finding:
    """One finding for everything one distribution requires and nothing installs: a fresh
    environment missing ten dependencies of a package is one thing to fix, not ten."""
    first, finding = group[0]
    key = f"{interp}: {first.requirer} → missing"  # one identity however many are missing
    if len(group) == 1:
        return replace(finding, key=key)
    texts = [b.text + (f" (extra [{b.extra}])" if b.extra else "") for b, _ in group]
    needs = ", ".join(texts[:-1]) + " and " + texts[-1]
    return Finding(
        severity=max((f.severity for _, f in group), key=lambda s: s.rank),
        why=f"{first.requirer} {first.requirer_version} requires {needs}, but none of them is installed{where}",
        fix="pip install " + " ".join(f"'{b.text}'" for b, _ in group),
        reference=PIP_CHECK,
        subjects=tuple(dict.fromkeys(s for _, f in group for s in f.subjects)),
        key=key,
    )


def broken_requirements(
    dists: Facts, python_version: Any, arch: str | None, focus: frozenset[str] = frozenset()
) -> list[Broken]:
    """Every unmet requirement of ``dists`` (one interpreter's distributions).

    The hot loop of a big environment (10,000 requirement strings): each string is parsed
    once per process, each (range, version) and (marker, environment) decided once."""
    envs = _marker_envs(python_version if isinstance(python_version, str) else None, arch)
    versions = {name: d.get("version") for name, d in dists.items() if isinstance(d, dict)}
    found = []
    for requirer, dist in dists.items():
        requires = dist.get("requires") if isinstance(dist, dict) else None
        if not isinstance(requires, list):
            continue
        for text in requires:
            req = _prepare(text) if isinstance(text, str) else None
            if req is None or req.dependency == requirer:
                continue  # unreadable metadata is no evidence; "pkg[extra]" names itself
            installed = versions.get(req.dependency)
            installed = installed if isinstance(installed, str) else None
            extra = None
            if req.marker is not None:
                applies = _applies(req.marker, envs, "")
                if applies is None:
                    continue  # decided by a platform we do not know
                if not applies:
                    if installed is None or requirer not in focus or req.dependency not in focus:
                        continue  # not for this interpreter, or an extra we cannot tell was asked for
                    extras = [e for e in req.marker_extras if e not in DEV_EXTRAS]
                    extra = next((e for e in extras if _applies(req.marker, envs, e)), None)
                    if extra is None:
                        continue
            if installed is not None and satisfies(req.specifier, installed):
                continue
            found.append(Broken(requirer, str(dist.get("version")), req.spelled, req.dependency, req.specifier,
                                installed, extra))
    return sorted(found, key=lambda b: (b.requirer, b.dependency))


def _finding(host: Host, interp: str, where: str, broken: Broken, dists: Facts) -> Finding:
    subjects = [*package_subjects(broken.requirer), *package_subjects(broken.dependency)]
    consequence, severity, reference = "", Severity.low, PIP_CHECK
    fix = f"pip install '{broken.text}'" + (
        f" (what {broken.requirer} {broken.requirer_version} requires)" if broken.installed else ""
    )
    if broken.dependency == "torch" and broken.installed is not None:
        native = _pinned_natives(broken, dists)
        if broken.requirer in TORCH_NATIVE or native:
            pinned = " and ".join(f"{n} {v}" for n, v in native)
            if broken.requirer in TORCH_NATIVE:
                built = broken.requirer + (f" and {pinned} (pinned with it)" if pinned else "")
            else:
                built = f"{pinned}, pinned with it by {broken.requirer},"
            plural = " and " in built
            consequence = (
                f": {built} {'are' if plural else 'is'} built against torch{broken.specifier} and "
                f"{'their' if plural else 'its'} native ops fail to load with `undefined symbol`"
            )
            severity, reference = Severity.critical, TORCH_ABI
            subjects += [s for n, _ in native for s in package_subjects(n)] + [("cuda", f"torch ({interp})")]
            fix += f", or builds made for torch {broken.installed}"
    elif broken.dependency in KERNELS and broken.installed is not None and host.focus(broken.requirer):
        consequence = (
            f": {broken.requirer} calls {broken.dependency}'s kernels by the signatures of the pinned "
            "build, so expect import errors (missing ops, `undefined symbol`) or wrong results"
        )
        severity = Severity.high
    elif host.focus(broken.requirer) or host.focus(broken.dependency):
        severity = Severity.high if broken.installed is not None or not broken.extra else Severity.medium
    return Finding(
        severity=severity,
        why=broken.sentence + where + consequence,
        fix=fix,
        reference=reference,
        subjects=tuple(dict.fromkeys(subjects)),
        key=f"{interp}: {broken.requirer} → {broken.dependency}",
    )


def _pinned_natives(broken: Broken, dists: Facts) -> list[tuple[str, str]]:
    """Native packages the requirer pins exactly and that are installed at that pin: they
    were built for the torch the requirer pins next to them (sglang pins both)."""
    found = []
    requires = as_dict(dists.get(broken.requirer)).get("requires")
    for text in requires if isinstance(requires, list) else []:
        req = _prepare(text) if isinstance(text, str) else None
        if req is None or req.dependency not in TORCH_NATIVE or not req.exact:
            continue
        name = req.dependency
        version = as_dict(dists.get(name)).get("version")
        if isinstance(version, str) and satisfies(req.specifier, version):
            found.append((name, version))
    return found


@lru_cache(maxsize=65536)
def _prepare(text: str) -> Parsed | None:
    try:
        req = Requirement(text)
    except (InvalidRequirement, ValueError):
        return None
    specifier = str(req.specifier)
    marker = str(req.marker) if req.marker is not None else None
    return Parsed(
        dependency=normalize_name(req.name),
        spelled=req.name + (f"[{','.join(sorted(req.extras))}]" if req.extras else "") + specifier,
        specifier=specifier,
        marker=marker,
        marker_extras=tuple(_EXTRA.findall(marker)) if marker else (),
        exact=any(s.operator in ("==", "===") for s in req.specifier),
    )


@lru_cache(maxsize=65536)
def satisfies(specifier: str, version: str) -> bool:
    try:
        parsed = Version(version)
    except InvalidVersion:
        return True  # a version packaging cannot read proves nothing
    return SpecifierSet(specifier).contains(parsed, prereleases=True)


Env = tuple[tuple[str, str], ...]  # a marker environment, hashable for the caches


@lru_cache(maxsize=65536)
def _applies(marker: str, envs: tuple[Env, ...], extra: str) -> bool | None:
    """The marker's verdict, the same under every environment we could be on; None when
    the unknown architecture decides it (or the marker cannot be read)."""
    results = set()
    for env in envs:
        try:
            results.add(Marker(marker).evaluate({**dict(env), "extra": extra}))
        except Exception:  # an unknown marker variable or operator: no evidence
            return None
    return results.pop() if len(results) == 1 else None


@lru_cache(maxsize=64)
def _marker_envs(python_version: str | None, arch: str | None) -> tuple[Env, ...]:
    # The target's interpreter decides python_version markers, not ours; a GPU host is Linux.
    env = {key: str(value) for key, value in default_environment().items()}
    env.update(sys_platform="linux", platform_system="Linux", os_name="posix", extra="")
    if python_version and python_version.count(".") >= 1:
        env["python_full_version"] = python_version
        env["python_version"] = ".".join(python_version.split(".")[:2])
    return tuple(tuple(sorted({**env, "platform_machine": m}.items())) for m in ([arch] if arch else ARCHES))
