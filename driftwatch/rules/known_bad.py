"""Known-bad versions: the data file's ranges (and the config's ``[[rules]]``) against what
is installed, and for NCCL also against what a server's log says it loaded."""

from __future__ import annotations

from collections.abc import Iterator
from fnmatch import fnmatchcase

from driftwatch.facts.read import as_dict, normalize_name
from driftwatch.rules.finding import Finding, Subject
from driftwatch.facts.names import package_subjects
from driftwatch.rules.host import Host, Missing
from driftwatch.rules.requirements import satisfies
from driftwatch.rules.versions import NCCL, VersionRule, shipped_rules

NCCL_WHEELS = "nvidia-nccl-cu*"
Installed = tuple[str, str, str, tuple[Subject, ...]]  # (name, version, where, subjects)


def known_bad_versions(host: Host) -> list[Finding]:
    installed = list(_installed(host))
    if not installed:
        raise Missing("no installed versions were read (python and cuda probes)")
    arch = host.arch()
    findings = []
    for rule in (*shipped_rules(), *host.options.version_rules):
        if rule.arch is not None and rule.arch != arch:
            continue  # another architecture's fault, or ours is unknown
        if rule.unless_set and _set_anywhere(host, rule.unless_set):
            continue
        hits = [i for i in installed if _matches(rule, i[0]) and satisfies(rule.versions, i[1])]
        if not hits or not _with_met(rule, installed):
            continue
        versions = sorted({f"{name} {version}{where}" for name, version, where, _ in hits})
        findings.append(Finding(
            severity=rule.severity,
            why=f"{', '.join(versions)}: {rule.message}",
            fix=rule.fix or f"install a {rule.package} version outside {rule.versions}",
            reference=rule.reference,
            subjects=tuple(dict.fromkeys(s for hit in hits for s in hit[3])),
            key=f"{rule.package} {rule.versions} {rule.reference}",
            observed=False,
        ))
    return findings


def _installed(host: Host) -> Iterator[Installed]:
    """Every (name, version) we know: distributions, system NCCL, NCCL a server logged."""
    wheels = not _all_interpreters_read(host)  # an unread interpreter may hold a wheel
    try:
        for _, name, dist in host.distributions():
            version = dist.get("version")
            if isinstance(version, str):
                wheels |= fnmatchcase(name, NCCL_WHEELS)
                yield name, version, "", package_subjects(name)
    except Missing:
        pass
    # A system libnccl is what loads only where no NCCL wheel is installed (torch's wheels
    # bring their own); the version a server logs is what loaded, wherever it came from.
    if host.has("cuda") and not wheels:
        system = as_dict(as_dict(host.facts("cuda").get("nccl")).get("system"))
        for path, version in sorted(system.items()):
            if isinstance(version, str):
                yield "libnccl", version, f" ({path})", (("nccl", "libnccl (system)"),)
    for log in host.logs():
        for version in log.get("nccl_versions") or []:
            if isinstance(version, str):
                yield "libnccl", version, f" (loaded, per {log.get('path')})", (("nccl", str(log.get("path"))),)


def _all_interpreters_read(host: Host) -> bool:
    if not host.has("python"):
        return False
    interpreters = as_dict(host.facts("python").get("interpreters")).values()
    return all(isinstance(i, dict) and not i.get("error") for i in interpreters)


def _matches(rule: VersionRule, name: str) -> bool:
    if rule.package == NCCL:
        return name == "libnccl" or fnmatchcase(name, NCCL_WHEELS)
    return fnmatchcase(name, rule.package)


def _with_met(rule: VersionRule, installed: list[Installed]) -> bool:
    return all(
        any(fnmatchcase(name, normalize_name(other)) and satisfies(spec, version) for name, version, _, _ in installed)
        for other, spec in rule.with_.items()
    )


def _set_anywhere(host: Host, names: list[str]) -> bool:
    try:
        return any(name in source.values for source in host.sources() for name in names)
    except Missing:
        return False
