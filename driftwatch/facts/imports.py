"""What the python probe's ``resolution`` facts say about why a copy of a package comes first
on an interpreter's sys.path, for a diff line and a finding alike."""

from __future__ import annotations

from driftwatch.facts.read import Facts, as_dict


def why_first(location: str, facts: Facts) -> str:
    """Why ``import`` finds a package in ``location`` (the interpreter's resolution facts)."""
    user = as_dict(facts.get("user_site"))
    pythonpath = str(facts.get("pythonpath") or "")
    if location and location == user.get("path"):
        if as_dict(facts.get("venv")).get("include_system_site_packages"):
            return ("it is the user site-packages, which this venv sees because it includes system site packages "
                    "(pyvenv.cfg): what the venv lacks comes from there")
        return "it is the user site-packages, which site.py puts before the interpreter's site-packages"
    if location and location in pythonpath.split(":"):
        return "PYTHONPATH puts it before site-packages"
    return "it comes earlier on sys.path"


def imported_elsewhere(found: Facts, dist: Facts) -> bool:
    """``import`` finds the package outside its distribution's directory, and not because the
    distribution is an editable install (whose code lives in its source tree by design)."""
    location, mine = found.get("location"), dist.get("location")
    return bool(location and mine and location != mine and not dist.get("editable"))


def user_bin_effect(interp: str, shebang: object) -> str:
    """What a ~/.local/bin command with the same name as one of the environment's does."""
    other = str(shebang or "")
    runs = (f"it runs {other.split()[0] if other else 'another interpreter'}, not {interp}" if other != interp
            else f"it runs {interp} too")
    return (f"a login shell whose PATH has ~/.local/bin first (Ubuntu's ~/.profile prepends it) runs this one: "
            f"{runs}, with that interpreter's packages")
