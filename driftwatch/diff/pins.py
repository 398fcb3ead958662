"""Requires-Dist pins an installed version no longer satisfies.

Pins are not changes of their own (a requirement list changes with every upgrade);
they are evidence appended to a package change: "sglang 0.5.6 requires
sgl-kernel==0.3.16.post4, but 0.3.17 is installed".
"""

from __future__ import annotations

import re
from typing import Any

from packaging.markers import default_environment
from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from driftwatch.diff.context import Facts, as_dict, normalize_name

MAX_MENTIONS = 3


class Pins:
    """Pin checks against one interpreter's installed distributions (the new snapshot's)."""

    def __init__(self, dists: Facts, python_version: Any) -> None:
        self.dists = dists
        self.env = _marker_env(python_version)
        self._joined: list[tuple[str, str]] | None = None
        self._seen: set[tuple[str, str]] = set()  # one mention per (requirer, dependency)

    def problems(self, name: str) -> list[str]:
        """Broken pins on ``name`` by others, then ``name``'s own broken pins."""
        found = [s for r, text in self._requirers_of(name) if (s := self._check(r, text))]
        found += [s for text in _requires(self.dists.get(name)) if (s := self._check(name, text))]
        return found[:MAX_MENTIONS]

    def _requirers_of(self, name: str) -> list[tuple[str, str]]:
        # One regex per changed package over each distribution's requirements joined
        # into one string: parsing (or even splitting) all ~10,000 requirement strings of
        # a big environment would cost more than the whole rest of the diff.
        if self._joined is None:
            self._joined = [(r, "\n".join(_requires(d))) for r, d in self.dists.items()]
        spelled = "[-_.]+".join(re.escape(part) for part in name.split("-"))
        pattern = re.compile(rf"^[ \t]*{spelled}(?![A-Za-z0-9._-])", re.IGNORECASE | re.MULTILINE)
        found = []
        for requirer, joined in self._joined:
            if joined and pattern.search(joined):
                found += [
                    (requirer, text)
                    for text in _requires(self.dists[requirer])
                    if pattern.match(text)
                ]
        return found

    def _check(self, requirer: str, text: str) -> str | None:
        try:
            req = Requirement(text)
            if req.marker is not None and not req.marker.evaluate(self.env):
                return None
        except (InvalidRequirement, ValueError, KeyError, TypeError):
            return None  # unreadable metadata is no evidence either way
        dep = normalize_name(req.name)
        if (requirer, dep) in self._seen or dep == requirer:
            return None
        installed = as_dict(self.dists.get(dep)).get("version")
        if isinstance(installed, str) and _satisfies(req, installed):
            return None
        self._seen.add((requirer, dep))
        version = as_dict(self.dists.get(requirer)).get("version")
        have = f"{installed} is installed" if isinstance(installed, str) else "it is not installed"
        return f"{requirer} {version} requires {req.name}{req.specifier}, but {have}"


def _requires(dist: Any) -> list[str]:
    requires = as_dict(dist).get("requires")
    return [t for t in requires if isinstance(t, str)] if isinstance(requires, list) else []


def _satisfies(req: Requirement, version: str) -> bool:
    try:
        parsed = Version(version)
    except InvalidVersion:
        return True  # a version packaging cannot read proves nothing
    return req.specifier.contains(parsed, prereleases=True)


def _marker_env(python_version: Any) -> dict[str, str]:
    # The target's interpreter decides python_version markers, not ours; a GPU host is
    # Linux. Markers on extras count as not requested (extra == "").
    env = {key: str(value) for key, value in default_environment().items()}
    env.update(sys_platform="linux", platform_system="Linux", os_name="posix", extra="")
    if isinstance(python_version, str) and python_version.count(".") >= 1:
        env["python_full_version"] = python_version
        env["python_version"] = ".".join(python_version.split(".")[:2])
    return env
