"""Python's own resolution (the python probe's ``resolution``): a focus package that ``import``
finds somewhere else than the environment's own copy.

``site`` puts the user site-packages (``~/.local/lib/pythonX.Y/site-packages``) before the
interpreter's site-packages for a bare interpreter and for a venv created with
``include-system-site-packages = true``; ``PYTHONPATH`` comes before both. A ``pip install --user
torch`` from months ago then decides which torch a server imports, whatever the venv holds.
"""

from __future__ import annotations

from driftwatch.facts import fmt
from driftwatch.facts.imports import imported_elsewhere, why_first
from driftwatch.facts.names import package_subjects
from driftwatch.facts.read import Facts, as_dict
from driftwatch.rules.finding import Finding
from driftwatch.rules.host import Host, Missing
from driftwatch.severity import Severity

SITE = "https://docs.python.org/3/library/site.html"


def shadowed_packages(host: Host) -> list[Finding]:
    findings = []
    read = False
    for interp, facts in host.interpreters().items():
        resolution = as_dict(facts.get("resolution"))
        if not resolution or resolution.get("error"):
            continue
        read = True
        dists = as_dict(facts.get("distributions"))
        user = as_dict(resolution.get("user_site")).get("path")
        in_venv = bool(as_dict(resolution.get("venv")))
        shadowed = as_dict(resolution.get("shadowed"))
        for name, dist in sorted(dists.items()):
            dist = as_dict(dist)
            copies = shadowed.get(name) if isinstance(shadowed.get(name), list) else []
            location = dist.get("location")
            pythonpath = str(resolution.get("pythonpath") or "").split(":")
            # From the user site in a venv (what the venv lacks), or ahead of another copy.
            outside = location == user and (in_venv or copies) or location in pythonpath and copies
            if host.focus(name) and outside:
                findings.append(_first_copy(interp, name, dist, copies, resolution))
        for name, found in sorted(as_dict(resolution.get("imports")).items()):
            finding = _import_elsewhere(interp, name, as_dict(found), as_dict(dists.get(name)))
            findings += [finding] if finding else []
    if not read:
        raise Missing("no interpreter reported how its imports resolve")
    return findings


def _first_copy(interp: str, name: str, first: Facts, copies: list, resolution: Facts) -> Finding:
    location = str(first.get("location") or "")
    hidden = ", ".join(f"{as_dict(c).get('version')} in {as_dict(c).get('location')}" for c in copies)
    hidden = f"not {hidden}" if hidden else "a copy outside the environment"
    user = location == as_dict(resolution.get("user_site")).get("path")
    fix = (f"{interp} -m pip uninstall {name} with the user site in view (it removes the user copy), or run the "
           "server with PYTHONNOUSERSITE=1 (a venv: include-system-site-packages = false in pyvenv.cfg)" if user
           else f"remove {location} from PYTHONPATH (or the copy of {name} in it)")
    return Finding(
        severity=Severity.high,
        why=f"{interp} imports {name} {fmt.value(first.get('version'))} from {location}, {hidden}: "
            f"{why_first(location, resolution)}",
        fix=fix, reference=SITE,
        subjects=(("package", f"{name} (sys.path, {interp})"), *package_subjects(name),
                  ("python", f"user site ({interp})"), ("python", f"PYTHONPATH ({interp})")),
        key=f"{interp}: {name}", observed=True, restates=(("package", f"{name} (sys.path, {interp})"),))


def _import_elsewhere(interp: str, name: str, found: Facts, dist: Facts) -> Finding | None:
    location, mine = found.get("location"), dist.get("location")
    if not imported_elsewhere(found, dist):
        return None
    module = found.get("module")
    line = ("package", f"import {module} ({interp})")
    return Finding(
        severity=Severity.high,
        why=f"`import {module}` in {interp} finds {location}, not {name} {fmt.value(dist.get('version'))}'s copy in "
            f"{mine}: the code that runs is not the installed release",
        fix="remove the other copy (or its directory from PYTHONPATH / the .pth file that adds it)",
        reference=SITE, subjects=(line, *package_subjects(name)), key=f"{interp}: import {module}",
        observed=True, restates=(line,))


PIP_USER = "https://pip.pypa.io/en/stable/user_guide/#user-installs"


def user_bin_commands(host: Host) -> list[Finding]:
    """A command of the environment (torchrun, vllm) that ~/.local/bin has too, running another
    interpreter: a login shell that puts ~/.local/bin first runs the stale one."""
    findings = []
    read = False
    for interp, facts in host.interpreters().items():
        user_bin = as_dict(as_dict(facts.get("resolution")).get("user_bin"))
        if not user_bin or user_bin.get("error"):
            continue
        read = True
        own = {interp, str(facts.get("executable") or "")}
        for name, shebang in sorted(as_dict(user_bin.get("commands")).items()):
            runs = str(shebang or "").split(" ")[0]
            if runs in own:
                continue
            path = f"{user_bin.get('path')}/{name}"
            findings.append(Finding(
                severity=Severity.medium,
                why=f"{path} shadows {interp}'s {name} on a PATH with ~/.local/bin first (Ubuntu's ~/.profile "
                    f"prepends it): it runs {runs or 'another interpreter'} with that interpreter's packages",
                fix=f"remove {path} (pip uninstall --user with the interpreter that installed it), or start "
                    f"{name} by its path in the environment ({interp} -m …)",
                reference=PIP_USER, subjects=(("python", path),), key=f"{interp}: {name}",
                restates=(("python", path),)))
    if not read:
        raise Missing("no interpreter reported its user bin directory")
    return findings
