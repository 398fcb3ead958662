"""How an interpreter resolves imports (the python probe's ``resolution``): which copy of a
package ``import`` really finds.

The version a distribution's metadata reports is the first copy on ``sys.path``; a user
site-packages that a venv with ``include-system-site-packages`` (or a bare interpreter) puts
ahead, a ``PYTHONPATH`` entry, or a ``.pth`` file that runs code can each make ``import torch``
load another torch than the one pip installed into the environment. Changes name the copy
that now wins and why it comes first.
"""

from __future__ import annotations

from typing import Any

from driftwatch.diff.change import Change, Severity
from driftwatch.facts import fmt
from driftwatch.facts.imports import imported_elsewhere, user_bin_effect, why_first
from driftwatch.facts.read import Facts, as_dict


def diff_imports(interp: str, old: Facts, new: Facts, old_dists: Facts, new_dists: Facts) -> list[Change]:
    if not old or not new or old.get("error") or new.get("error"):
        return []
    changes = [*_user_site(interp, as_dict(old.get("user_site")), as_dict(new.get("user_site")))]
    changes += _shadowed(interp, as_dict(old.get("shadowed")), as_dict(new.get("shadowed")), old_dists, new_dists, new)
    changes += _moved(interp, old_dists, new_dists, new)
    changes += _imports(interp, as_dict(old.get("imports")), as_dict(new.get("imports")), new_dists)
    changes += _pth(interp, as_dict(old.get("pth")), as_dict(new.get("pth")))
    changes += _user_bin(interp, as_dict(old.get("user_bin")), as_dict(new.get("user_bin")), new_dists)
    if old.get("pythonpath") != new.get("pythonpath"):
        text = (f"PYTHONPATH for {interp} {fmt.value(old.get('pythonpath'))} → {fmt.value(new.get('pythonpath'))}: "
                "its directories come before site-packages on sys.path")
        changes.append(Change("python", f"PYTHONPATH ({interp})", old.get("pythonpath"), new.get("pythonpath"),
                              Severity.medium, text))
    return changes


def _user_site(interp: str, old: Facts, new: Facts) -> list[Change]:
    was, now = bool(old.get("on_path")), bool(new.get("on_path"))
    if was == now:
        return []
    path = fmt.value(new.get("path") or old.get("path"))
    if now:
        text = (f"the user site-packages {path} is now on {interp}'s sys.path ({fmt.value(new.get('distributions'))} "
                "distributions), ahead of the interpreter's own: a package installed there with pip --user "
                "shadows the environment's")
        return [Change("python", f"user site ({interp})", False, True, Severity.medium, text)]
    text = f"the user site-packages {path} is no longer on {interp}'s sys.path"
    return [Change("python", f"user site ({interp})", True, False, Severity.low, text)]


def _shadowed(interp: str, old: Facts, new: Facts, old_dists: Facts, dists: Facts, facts: Facts) -> list[Change]:
    changes = []
    for name in sorted(new.keys() - old.keys()):
        first = as_dict(dists.get(name))
        hidden = ", ".join(f"{c.get('version')} in {c.get('location')}" for c in new[name] if isinstance(c, dict))
        location = str(first.get("location") or "")
        text = (f"{name} {fmt.value(first.get('version'))} in {location} now comes first on {interp}'s sys.path and "
                f"is what `import` loads, not {hidden}: {why_first(location, facts)}")
        changes.append(Change("package", f"{name} (sys.path, {interp})", None, location, Severity.high, text,
                              magnitude=2.5, carries=(("package", name),)))
    for name in sorted(old.keys() - new.keys()):
        if as_dict(old_dists.get(name)).get("location") != as_dict(dists.get(name)).get("location"):
            continue  # the first copy went: _moved says where the import goes now
        text = f"{name} has one copy on {interp}'s sys.path again"
        changes.append(Change("package", f"{name} (sys.path, {interp})", "shadowing", None, Severity.low, text))
    return changes


def _moved(interp: str, old_dists: Facts, new_dists: Facts, facts: Facts) -> list[Change]:
    """A distribution now imported from the user site or a PYTHONPATH directory, where it came
    from the environment's own site-packages before (its copy there removed or never reinstalled)."""
    changes = []
    outside = {str(as_dict(facts.get("user_site")).get("path") or ""), *str(facts.get("pythonpath") or "").split(":")}
    for name in sorted(old_dists.keys() & new_dists.keys()):
        o, n = as_dict(old_dists[name]), as_dict(new_dists[name])
        location = str(n.get("location") or "")
        if not location or location == o.get("location") or location not in outside - {""}:
            continue
        text = (f"{name} is now imported from {location} ({fmt.value(n.get('version'))}) by {interp}, where it came "
                f"from {o.get('location')} ({fmt.value(o.get('version'))}): {why_first(location, facts)}")
        user_site = location == str(as_dict(facts.get("user_site")).get("path") or "")
        short = (f"{name} {fmt.value(n.get('version'))} is now imported from "
                 f"{'the user site-packages' if user_site else 'a PYTHONPATH directory'}, not the environment's "
                 f"{fmt.value(o.get('version'))}")
        # It carries the version line of the same name: that is the other copy, not an install.
        changes.append(Change("package", f"{name} (sys.path, {interp})", o.get("location"), location,
                              Severity.high, text, magnitude=2.5, carries=(("package", name),), headline=short))
    return changes


def _imports(interp: str, old: Facts, new: Facts, dists: Facts) -> list[Change]:
    changes = []
    for name in sorted(old.keys() & new.keys()):
        o, n = as_dict(old[name]), as_dict(new[name])
        if o.get("location") == n.get("location"):
            continue
        dist = as_dict(dists.get(name))
        mine = dist.get("location")
        if imported_elsewhere(n, dist):
            text = (f"`import {n.get('module')}` in {interp} now finds {n.get('location')}, not {name} "
                    f"{fmt.value(dist.get('version'))}'s copy in {mine}: a second copy without metadata comes first "
                    "(PYTHONPATH, a .pth file, or a directory earlier on sys.path)")
            severity = Severity.high
        else:
            text = f"`import {n.get('module')}` in {interp} finds {name}'s own copy again (was {o.get('location')})"
            severity = Severity.low
        changes.append(Change("package", f"import {n.get('module')} ({interp})", o.get("location"),
                              n.get("location"), severity, text, magnitude=2.5))
    return changes


def _user_bin(interp: str, old: Facts, new: Facts, dists: Facts) -> list[Change]:
    if old.get("error") or new.get("error"):
        return []
    before, after = as_dict(old.get("commands")), as_dict(new.get("commands"))
    changes = []
    for name in sorted(after.keys() - before.keys()):
        text = (f"{new.get('path')}/{name} appeared (#!{fmt.value(after[name])}), a command {interp}'s environment has "
                f"too: {user_bin_effect(interp, after[name])}")
        changes.append(Change("python", f"{new.get('path')}/{name}", None, after[name], Severity.medium, text))
    for name in sorted(before.keys() - after.keys()):
        text = f"{old.get('path')}/{name} is gone: {interp}'s own {name} is the one on PATH again"
        changes.append(Change("python", f"{old.get('path')}/{name}", before[name], None, Severity.low, text))
    return changes


def _pth(interp: str, old: Facts, new: Facts) -> list[Change]:
    changes = []
    for path in sorted(old.keys() | new.keys()):
        o, n = as_dict(old.get(path)), as_dict(new.get(path))
        if o.get("imports") == n.get("imports"):
            continue
        lines: Any = n.get("imports") or []
        if n and lines:
            state = "now runs" if not o else "runs other code"
            text = (f"{path} {state} at every start of {interp} (site.py executes its import lines): "
                    f"{fmt.value(lines[0])}")
            changes.append(Change("python", path, o.get("imports"), lines, Severity.medium, text))
        elif o:
            text = f"{path} no longer runs code at the start of {interp}"
            changes.append(Change("python", path, o.get("imports"), None, Severity.low, text))
    return changes
