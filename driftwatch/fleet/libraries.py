"""Fleet facts of the libraries as loaded: library builds, RECORD integrity, the driver's layers.

Paths differ between identical hosts (one venv per host, at another place), so libraries
are compared by what makes them the same library elsewhere: a server's library by its
name (SONAME), an installed one by its path inside site-packages, a system one by its file
name; the value is the build (GNU build-id). A boot line is compared parameter by
parameter, leaving out the ones that name this host's disks.
"""

from __future__ import annotations

from typing import Any

from driftwatch.diff.change import Severity
from driftwatch.facts.read import as_dict
from driftwatch.diff.driver import P2P_PARAMS
from driftwatch.facts.names import file_category, short_path
from driftwatch.fleet.facts import Area, Fact, FactMap, HostView, freeze
from driftwatch.fleet.runtime import SERVERS

HOST_PARAMS = frozenset({"root", "resume", "initrd", "BOOT_IMAGE", "cryptdevice", "ip"})


def _build(entry: Any) -> str:
    """The build-id; any file it cannot be read from (not ELF, cut, unreadable) is one value."""
    e = as_dict(entry)
    return "unreadable" if e.get("error") else str(e.get("build_id") or "no build-id")


def libraries_facts(facts: dict[str, Any], view: HostView) -> tuple[FactMap, frozenset[str]]:
    files = as_dict(facts.get("files"))
    out: FactMap = {}
    for server, libs in as_dict(facts.get("servers")).items():
        for name, paths in as_dict(libs).items():
            value = tuple(sorted(f"{short_path(p)} {_build(files.get(p))}" for p in paths or []))
            out[f"library[{server}][{name}]"] = Fact("libraries", file_category(name), f"{name} ({server})",
                                                     f"{name} mapped by {server} (copy and build-id)", value,
                                                     Severity.high, within=SERVERS)
    for key, interp in as_dict(facts.get("interpreters")).items():
        label = view.interpreters.get(key, key)
        for path in as_dict(interp).get("libraries") or []:
            short, owners = short_path(path), sorted(as_dict(as_dict(files.get(path)).get("owners")))
            # Compared among hosts with the same version of its wheel: another version is
            # the python area's finding; the same version, another build, is this one.
            within = f"python[{label}].dist[{owners[0]}]" if len(owners) == 1 else None
            out[f"library[{label}][{short}]"] = Fact("libraries", file_category(short), short,
                                                     f"{short} build-id ({label})", _build(files.get(path)),
                                                     Severity.high, within=within)
    for path in facts.get("system") or []:
        name = str(path).rsplit("/", 1)[-1]
        out[f"library[system][{name}]"] = Fact("libraries", file_category(name), name, f"{name} build-id",
                                               _build(files.get(path)), Severity.medium)
    for key, report in as_dict(facts.get("integrity")).items():
        out.update(_integrity(view.interpreters.get(key, key), as_dict(report)))
    return out, frozenset({"files", "servers", "servers_error", "interpreters", "system", "integrity", "truncated"})


def _integrity(label: str, report: dict[str, Any]) -> FactMap:
    out: FactMap = {}
    if report.get("error"):
        return out  # the python area reports the failed interpreter
    for path, entry in as_dict(report.get("shared")).items():
        short = short_path(path)
        out[f"integrity[{label}].shared[{short}]"] = Fact(
            "libraries", file_category(short), short, f"whose copy of {short} is on disk ({label})",
            freeze(as_dict(entry).get("on_disk")), Severity.high)
    for kind, words in (("modified", "files differing from RECORD"), ("missing", "files missing")):
        by_dist: dict[str, list[str]] = {}
        for path, entry in as_dict(report.get(kind)).items():
            by_dist.setdefault(str(as_dict(entry).get("distribution")), []).append(short_path(path))
        for dist, paths in by_dist.items():
            out[f"integrity[{label}].{kind}[{dist}]"] = Fact("libraries", "package", dist, f"{dist} {words} ({label})",
                                                              tuple(sorted(paths)), Severity.high, focus=True)
    return out


def driver_facts(facts: dict[str, Any], view: HostView) -> tuple[FactMap, frozenset[str]]:
    module, user = as_dict(facts.get("kernel_module")), as_dict(facts.get("userspace"))
    fm, ctk = as_dict(facts.get("fabric_manager")), as_dict(facts.get("container_toolkit"))
    rows: list[tuple[str, str, Any, Severity]] = [
        ("kernel_module", "NVIDIA kernel module", module.get("version") if module else None, Severity.critical),
        ("kernel_module.flavor", "NVIDIA kernel module flavour", module.get("flavor"), Severity.high),
        ("userspace", "userspace driver (libcuda)", user.get("version"), Severity.critical),
        ("fabric_manager", "fabric manager", fm.get("version") or fm.get("error") if fm else None, Severity.high),
        ("fabric_manager.service", "fabric manager service", fm.get("service") if fm else None, Severity.high),
        ("persistenced", "nvidia-persistenced running", as_dict(facts.get("persistenced")).get("running"),
         Severity.medium),
        ("container_toolkit", "NVIDIA container toolkit", ctk.get("version") or ctk.get("error") if ctk else None,
         Severity.medium),
        ("nvswitches", "NVSwitches on the PCI bus", facts.get("nvswitches"), Severity.high),
    ]
    out: FactMap = {f"driver.{key}": Fact("driver", "driver", key, label, freeze(value), severity)
                    for key, label, value, severity in rows}
    for name, value in as_dict(as_dict(facts.get("cmdline")).get("params")).items():
        if name in HOST_PARAMS or "uuid" in name.lower() or "UUID=" in str(value or ""):
            continue  # names this host's disks, not how it runs
        severity = Severity.high if name in P2P_PARAMS or name.startswith("nvidia") else Severity.medium
        out[f"cmdline[{name}]"] = Fact("driver", "system", f"cmdline {name}", f"kernel parameter {name}",
                                       "(flag)" if value is None else str(value), severity)
    return out, frozenset(facts)


LIBRARY_AREAS: dict[str, Area] = {"libraries": libraries_facts, "driver": driver_facts}
