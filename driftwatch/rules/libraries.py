"""The stack as loaded (the ``libraries`` probe): one file with two owners, installs that no
longer match their RECORD, and servers that map a library other than their wheels'."""

from __future__ import annotations

from driftwatch.facts import fmt
from driftwatch.facts.read import Facts, as_dict
from driftwatch.facts.names import file_category, short_path
from driftwatch.facts.loader import how_found, older
from driftwatch.rules.finding import Finding, Subject
from driftwatch.facts.names import package_subjects
from driftwatch.rules.host import Host, Missing
from driftwatch.severity import Severity

TWO_OWNERS = "https://github.com/pypa/pip/issues/4625"
RECORD_SPEC = "https://packaging.python.org/en/latest/specifications/recording-installed-packages/"
LD_SO = "https://man7.org/linux/man-pages/man8/ld.so.8.html"
# A toolkit's libnvJitLink on LD_LIBRARY_PATH shadowing the wheel's (pytorch #140797).
PR_NVJITLINK = "https://github.com/pytorch/pytorch/pull/141063"
DELETED = " (deleted)"
# Libraries whose copy decides collectives and kernels: a server must load its wheels' one.
STACK_LIBRARIES = ("libnccl", "libcudart", "libcublas", "libcudnn", "libnvrtc", "libnvJitLink", "libcusparse")
# Variables that put another copy first (in a server's environment when the watch list has them).
SHADOWING_ENV = ("LD_PRELOAD", "LD_LIBRARY_PATH", "VLLM_NCCL_SO_PATH", "NCCL_LIBRARY")


def file_two_owners(host: Host) -> list[Finding]:
    findings = []
    for interp, integrity in _integrity(host).items():
        for path, entry in sorted(as_dict(integrity.get("shared")).items()):
            entry = as_dict(entry)
            claims = {str(k): str(v) for k, v in as_dict(entry.get("claimed_by")).items()}
            if len(claims) < 2:
                continue
            holder, short = entry.get("on_disk"), short_path(path)
            owners = " and ".join(f"{name} {version}" for name, version in sorted(claims.items()))
            if holder in claims:
                others = sorted(n for n in claims if n != holder)
                loads = f"the copy on disk is {holder}'s, so {holder} {claims[holder]} is what loads"
                fix = (f"pip uninstall {' '.join(others)} (it deletes this file too), then "
                       f"pip install --force-reinstall --no-deps '{holder}=={claims[holder]}'")
            else:
                loads = "the copy on disk matches none of them"
                fix = "uninstall all but one of them, then reinstall that one with --force-reinstall --no-deps"
            native = not str(path).endswith(".py")
            findings.append(Finding(
                severity=Severity.high if native else Severity.medium,
                why=f"{short} is installed by {owners}{_where(host, interp)}: {loads}, whatever the other's metadata says",
                fix=fix,
                reference=TWO_OWNERS,
                subjects=(*(s for name in sorted(claims) for s in package_subjects(name)), (file_category(path), short)),
                key=f"{interp}: {path}",
                observed=True,
                restates=((file_category(path), short),),
            ))
    return findings


def modified_installs(host: Host) -> list[Finding]:
    findings = []
    for interp, integrity in _integrity(host).items():
        versions = as_dict(integrity.get("distributions"))
        for dist, (modified, missing) in sorted(_by_distribution(integrity).items()):
            paths = modified + missing
            native = [p for p in paths if not p.endswith(".py")]
            what = []
            if modified:
                what.append(f"{fmt.plural(len(modified), 'file')} differ{'s' if len(modified) == 1 else ''} from its RECORD")
            if missing:
                what.append(f"{fmt.plural(len(missing), 'file')} it lists {'is' if len(missing) == 1 else 'are'} missing")
            version = versions.get(dist)
            label = f"{dist} {version}" if version else dist
            line = (file_category(native[0]) if native else "package", dist)  # the RECORD diff's line
            findings.append(Finding(
                severity=Severity.high if native else Severity.medium,
                why=f"{label}{_where(host, interp)}: {' and '.join(what)} "
                    f"({fmt.listing([short_path(p) for p in paths])}): the code that runs is not the release's",
                fix=f"pip install --force-reinstall --no-deps '{dist}=={version}'" if version
                    else f"pip install --force-reinstall --no-deps {dist}",
                reference=RECORD_SPEC,
                subjects=(*package_subjects(dist), line),
                key=f"{interp}: {dist}",
                observed=True,
                restates=(line,),
            ))
    return findings


def shadowed_libraries(host: Host) -> list[Finding]:
    """A server that maps another copy of a library than its wheels ship (observed), or an
    interpreter whose wheel libraries the loader would resolve to another copy (predicted):
    for every library a wheel ships, with the search step that finds the other copy."""
    facts = host.facts("libraries")
    resolution = as_dict(facts.get("resolution"))
    if facts.get("servers_error") and (resolution.get("error") or not resolution):
        raise Missing(f"the servers' mapped libraries are unknown: {facts.get('servers_error')}")
    files = as_dict(facts.get("files"))
    wheels = _wheel_libraries(facts, files)
    findings = []
    for server, mapped in sorted(as_dict(facts.get("servers")).items()):
        env = _server_env(host, server)
        found = as_dict(as_dict(resolution.get("servers")).get(server))
        for name, paths in sorted(as_dict(mapped).items()):
            if not isinstance(paths, list) or not paths or not (name.startswith(STACK_LIBRARIES) or name in wheels):
                continue
            finding = _shadowed(server, name, [str(p) for p in paths], files, wheels.get(name, []), env,
                                as_dict(found.get(name)))
            findings += [finding] if finding else []
    for interp, context in sorted(as_dict(resolution.get("interpreters")).items()):
        for name, entry in sorted(as_dict(as_dict(context).get("libraries")).items()):
            finding = _would_load(interp, name, as_dict(entry), files)
            findings += [finding] if finding else []
    return findings


def _would_load(interp: str, name: str, entry: Facts, files: Facts) -> Finding | None:
    """The loader would give a wheel library another copy of ``name`` than its wheel's."""
    path, wheel = entry.get("path"), str(entry.get("wheel") or "")
    if not path or path == wheel:
        return None
    requester = str(entry.get("needed_by") or "?").rsplit("/", 1)[-1]
    line: Subject = (file_category(name), f"{name} ({interp})")  # the diff's resolution line
    via = entry.get("via")
    subjects: tuple[Subject, ...] = (line, *((("env", "LD_LIBRARY_PATH"),) if via == "LD_LIBRARY_PATH" else ()))
    if via == "LD_LIBRARY_PATH":
        fix = (f"take {entry.get('dir')} out of LD_LIBRARY_PATH (where the login profile or the service sets it), "
               "or put the wheel's directory before it; then restart the server")
    elif via == "ld.so.cache":
        fix = (f"remove {entry.get('dir')} from /etc/ld.so.conf.d and run ldconfig, or give the process an "
               "LD_LIBRARY_PATH that starts with the wheel's directory")
    else:
        fix = f"remove the copy at {path}, or put the wheel's directory first on LD_LIBRARY_PATH"
    return Finding(
        severity=Severity.high,
        why=f"{interp}: {requester} would load {_copy(str(path), files)} {how_found(entry)}, not the wheel's "
            f"{_copy(wheel, files)}{older(entry, files)}",
        fix=fix, reference=PR_NVJITLINK, subjects=subjects, key=f"{interp}: {name}", observed=False, restates=(line,))


def _shadowed(server: str, name: str, paths: list[str], files: Facts, wheel_paths: list[str],
              env: dict[str, str], found: Facts | None = None) -> Finding | None:
    line: Subject = (file_category(name), f"{name} ({server})")  # the diff's own line for this mapping
    subjects: tuple[Subject, ...] = (line, *(("env", v) for v in SHADOWING_ENV if v in env))
    key, restates = f"{server}: {name}", (line,)
    if len(paths) > 1:
        copies = ", ".join(_copy(p, files) for p in paths)
        return Finding(
            severity=Severity.high, why=f"the server {server} has two copies of {name} loaded in one process: {copies}",
            fix=f"make one {name} reachable (check LD_PRELOAD, LD_LIBRARY_PATH and the wheels), then restart the server",
            reference=LD_SO, subjects=subjects, key=key, observed=True, restates=restates)
    path = paths[0]
    if path.endswith(DELETED):
        return Finding(
            severity=Severity.medium,
            why=f"the server {server} still runs a {name} deleted or replaced on disk since it started "
                f"({path.removesuffix(DELETED)}): it runs the old build until it restarts",
            fix=f"restart the server {server}", reference=LD_SO, subjects=subjects, key=key, observed=True)
    if not wheel_paths or path in wheel_paths:
        return None
    set_here = [f"{v}={fmt.value(env[v])}" for v in SHADOWING_ENV if v in env]
    cause = f"; its environment sets {', '.join(set_here)}" if set_here else " (LD_PRELOAD, LD_LIBRARY_PATH, VLLM_NCCL_SO_PATH or a system copy)"
    if found and found.get("needed_by") and found.get("path") == path:
        cause = f": {found.get('needed_by', '').rsplit('/', 1)[-1]} finds it {how_found(found)}"
    wheel = ", ".join(_copy(p, files) for p in wheel_paths[:2])
    return Finding(
        severity=Severity.high,
        why=f"the server {server} maps {_copy(path, files)}, not its wheels' {wheel}: another copy is found first{cause}",
        fix="remove what puts that copy first (unset the variable, or the system library from the loader's path), "
            "then restart the server",
        reference=LD_SO, subjects=subjects, key=key, observed=True, restates=restates)


def _integrity(host: Host) -> dict[str, Facts]:
    found = {
        interp: entry for interp, entry in as_dict(host.facts("libraries").get("integrity")).items()
        if isinstance(entry, dict) and not entry.get("error")
    }
    if not found:
        raise Missing("no interpreter's installs were checked against their RECORD")
    return found


def _by_distribution(integrity: Facts) -> dict[str, tuple[list[str], list[str]]]:
    by: dict[str, tuple[list[str], list[str]]] = {}
    for index, kind in enumerate(("modified", "missing")):
        for path, entry in sorted(as_dict(integrity.get(kind)).items()):
            dist = as_dict(entry).get("distribution")
            if isinstance(dist, str):
                by.setdefault(dist, ([], []))[index].append(str(path))
    return by


def _wheel_libraries(facts: Facts, files: Facts) -> dict[str, list[str]]:
    """Library name → the copies the interpreters' wheels install."""
    found: dict[str, list[str]] = {}
    for interp in as_dict(facts.get("interpreters")).values():
        for path in as_dict(interp).get("libraries") or []:
            name = as_dict(files.get(path)).get("name") or str(path).rsplit("/", 1)[-1]
            found.setdefault(str(name), []).append(str(path))
    return found


def _server_env(host: Host, server: str) -> dict[str, str]:
    servers = as_dict(host.snapshot.facts("processes").get("servers"))
    env = as_dict(servers.get(server)).get("env")
    return {str(k): str(v) for k, v in env.items()} if isinstance(env, dict) else {}


def _copy(path: str, files: Facts) -> str:
    entry = as_dict(files.get(path))
    owners = as_dict(entry.get("owners"))
    detail = " ".join(f"{n} {v}" for n, v in sorted(owners.items())) or (
        f"version {entry['version']}" if entry.get("version") else "")
    return f"{short_path(path)} ({detail})" if detail else short_path(path)


def _where(host: Host, interp: str) -> str:
    integrity = as_dict(host.facts("libraries").get("integrity"))
    return f" ({interp})" if len(integrity) > 1 else ""
