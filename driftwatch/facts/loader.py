"""What the libraries probe's facts say about a library's copy: its most precise version, and
how the dynamic loader found it (the ``resolution`` facts: ld.so's search step and what it came
before), for a diff line and a finding alike."""

from __future__ import annotations

from packaging.version import InvalidVersion, Version

from driftwatch.facts import fmt
from driftwatch.facts.read import Facts, as_dict

DELETED = " (deleted)"


def file_name(path: str) -> str:
    return path.removesuffix(DELETED).rsplit("/", 1)[-1]


def how_found(entry: Facts) -> str:
    """Which step of ld.so's search found the copy, and why it came before the wheel's."""
    via, where = entry.get("via"), str(entry.get("dir"))  # a path: whole, as the other copies are
    requester = file_name(str(entry.get("needed_by") or "?"))
    runpath, rpath = entry.get("requester_runpath"), entry.get("requester_rpath")
    if via == "LD_LIBRARY_PATH":
        before = (f", which ld.so searches before {requester}'s RUNPATH {fmt.value(runpath)}" if runpath
                  else "")
        return f"through LD_LIBRARY_PATH ({where}){before}"
    if via == "ld.so.cache":
        reach = (f"{requester}'s RUNPATH {fmt.value(runpath)} does not reach the wheel" if runpath or rpath
                 else f"{requester} has no RUNPATH or RPATH to the wheel")
        return f"through the ld.so.cache directory {where} (/etc/ld.so.conf): {reach}"
    if via in ("RPATH", "RUNPATH"):
        return f"through {requester}'s {via} {where}"
    if via == "system directory":
        return f"from the system directory {where}"
    return f"({fmt.value(via)})"


def older(entry: Facts, files: Facts) -> str:
    """': older than the wheel's (12.1.105 < 12.4.127): …' when the versions say so."""
    found, wheel = as_dict(files.get(entry.get("path"))), as_dict(files.get(entry.get("wheel")))
    a, b = display_version(found), display_version(wheel)
    try:
        if Version(a) < Version(b):
            return (f": an older build ({a}) than the wheel's ({b}), so the libraries built against the wheel fail "
                    f"with 'undefined symbol: …, version {found.get('soname') or '…'}'")
    except InvalidVersion:
        pass
    return ""


def display_version(entry: Facts) -> str:
    """The most precise version known: a full one in the file name (libnccl.so.2.28.9),
    else the owning distributions' (``2.28.9 or 2.30.7`` when two claim the file), else
    the file name's major, else ``?``."""
    version = entry.get("version")
    owners = sorted({str(v) for v in as_dict(entry.get("owners")).values()})
    if isinstance(version, str) and version.count(".") >= 1:
        return version
    if owners:
        return " or ".join(owners)
    return str(version) if version else "?"
