"""The ``libraries`` probe: which build of each shared library is really there, and whether
the focus distributions' files are still the ones their RECORD lists.

Package metadata says "NCCL 2.28.9" for two different builds (a pip wheel and an OS
package, 219 MB and 190 MB), and keeps saying "nvidia-nccl-cu12 2.30.7" after
nvidia-nccl-cu13 overwrote the file. This probe records what is on disk and in memory:

* every shared library a watched server maps (from the one /proc walk the processes probe
  shares), every ``nvidia/*/lib/*.so*`` in each watched interpreter's site-packages and
  ``libnccl.so*`` in the system library directories: size, mtime, GNU build-id, SONAME,
  the version in its file name and the distributions whose RECORD lists it;
* for the focus distributions: native libraries and Python sources whose sha256 differs
  from RECORD, files missing, and files two distributions claim (with whose copy is on
  disk);
* what the dynamic loader resolves (``scripts/ld_resolve.py``): for every library name the
  interpreters' nvidia wheels ship, the copy ld.so picks when a wheel or torch library needs
  it, under the login environment's ``LD_LIBRARY_PATH``, the requester's RPATH/RUNPATH and
  ``/etc/ld.so.conf``; and for each server that maps another copy than its wheel's, the search
  step that found it (under the server's own ``LD_LIBRARY_PATH``).

One stdlib script (``scripts/elf_identity.py`` + ``scripts/libraries_collect.py``) does it
all on the target, after the interpreters' runs (for their ``sys.path``) and the /proc walk
(for the mapped libraries) that other probes share. The previous snapshot is the cache: a
library or file whose size, mtime, ctime and inode are unchanged is not read again, and
the counts in ``volatile`` say how much was read.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from driftwatch.probes.container_identity import identify
from driftwatch.probes.base import Facts, ProbeContext, ProbeError, ProbeSkipped, collect_json
from driftwatch.probes.cuda import NCCL_DIRS
from driftwatch.probes.processes import keyed_servers, observed, server_walk
from driftwatch.probes.python import extract_report, interpreter_reports
from driftwatch.transport import CommandResult

WHEEL_GLOBS = ["nvidia/*/lib/*.so*"]
# Libraries that load the wheels' ones (libtorch_cuda.so needs libcublas.so.12, libnccl.so.2, …).
REQUESTER_GLOBS = ["torch/lib/*.so*"]
PRELUDES = ("elf_identity.py", "ld_resolve.py")  # sent ahead of scripts/libraries_collect.py
SYSTEM_GLOBS = ["libnccl.so*"]
MAX_LIBRARIES = 4096
# Native libraries of focus distributions are hashed up to this size (libtorch_cuda.so
# passes 1 GiB); the time budget bounds a snapshot's hashing whatever the sizes.
MAX_HASH_BYTES = 4 << 30
CHANGED = "changed while being read"  # must match CHANGED in scripts/libraries_collect.py
DELETED = " (deleted)"
# libnccl.so.2.28.9 → (libnccl.so, 2.28.9); _C.abi3.so → (_C.abi3.so, None)
_FILE_NAME = re.compile(r"^(?P<stem>.+?\.so)(?:\.(?P<version>\d+(?:\.\d+)*))?$")
_ENTRY_DEFAULTS: dict[str, Any] = {"size": None, "mtime": None, "build_id": None, "soname": None, "error": None}


def file_name(path: str) -> str:
    return path.removesuffix(DELETED).rsplit("/", 1)[-1]


def version_from_name(path: str) -> str | None:
    """``2.28.9`` from ``…/libnccl.so.2.28.9``, ``2`` from ``libnccl.so.2``; None without one."""
    match = _FILE_NAME.match(file_name(path))
    return match.group("version") if match else None


def library_name(path: str, soname: str | None) -> str:
    """What a loader asks for: the SONAME when the file has one, else the file name cut to
    its major version (``libnccl.so.2.28.9`` → ``libnccl.so.2``), else the file name."""
    if soname:
        return soname
    base = file_name(path)
    match = _FILE_NAME.match(base)
    if match and match.group("version"):
        return f"{match.group('stem')}.{match.group('version').split('.')[0]}"
    return base


def cache_from(previous: Facts) -> dict[str, list[Any]]:
    """Stat key and identity of every library described in the previous snapshot."""
    cache: dict[str, list[Any]] = {}
    for path, entry in (previous.get("files") or {}).items():
        vol = entry.get("volatile") or {}
        # An ELF entry from before the loader's facts (no "dynamic") is read again, once.
        if "ctime_ns" in vol and entry.get("error") != CHANGED and ("dynamic" in entry or entry.get("error")):
            key = [entry.get("size"), vol.get("mtime_ns"), vol["ctime_ns"], vol.get("inode")]
            cache[path] = [*key, entry.get("build_id"), entry.get("soname"), entry.get("error"), entry.get("dynamic")]
    return cache


def digests_from(previous: Facts) -> dict[str, list[Any]]:
    """Stat key and on-disk sha256 of every file the previous snapshot found differing from
    its RECORD (modified, or another distribution's copy): their verdicts are reused."""
    digests: dict[str, list[Any]] = {}
    for report in (previous.get("integrity") or {}).values():
        for kind in ("modified", "shared"):
            for path, entry in ((report or {}).get(kind) or {}).items():
                vol = entry.get("volatile") or {}
                if entry.get("sha256") and "ctime_ns" in vol:
                    digests[path] = [entry.get("size"), vol.get("mtime_ns"), vol["ctime_ns"], vol.get("inode"),
                                     entry["sha256"]]
    return digests


def integrity_cache_from(previous: Facts) -> dict[str, Any]:
    """Per interpreter and focus distribution, what was verified last time (fingerprints
    of stat keys): the Python sources as one, each native library by itself."""
    return {
        name: (report.get("volatile") or {}).get("cache") or {}
        for name, report in (previous.get("integrity") or {}).items()
        if isinstance(report, dict)
    }


def _sys_path(outcome: CommandResult | ProbeError) -> list[str] | str:
    """The interpreter's sys.path from its python_collect run, or why there is none."""
    if isinstance(outcome, ProbeError):
        return str(outcome)
    try:
        path = extract_report(outcome.text).get("sys_path")
    except ProbeError as exc:
        return str(exc)
    return [str(p) for p in path] if isinstance(path, list) else "the collector reported no sys.path"


def _walk(ctx: ProbeContext) -> tuple[dict[str, Any], str | None]:
    """The watched servers as {key: {"pid", "mapped"}}, or why they are unknown."""
    try:
        report = server_walk(ctx)
    except ProbeError as exc:  # includes ProbeTimeout: the other libraries are still facts
        return {}, f"process walk: {exc}"
    if report.get("error"):
        return {}, str(report["error"])
    servers = {
        key: {"pid": raw.get("pid"), "mapped": raw.get("mapped") or {},
              "ld_library_path": (raw.get("env") or {}).get("LD_LIBRARY_PATH")}
        for key, raw in keyed_servers(report).items()
        # A container's paths name files in its image, not on the host: the containers
        # probe reads them through the container's own root.
        if identify(raw.get("context")) is None
    }
    return servers, None


def _login_ld_library_path(ctx: ProbeContext) -> tuple[str | None, str | None]:
    """LD_LIBRARY_PATH of a fresh login shell (what a server started from one inherits), or
    why it is unknown."""
    try:
        facts = observed(ctx)
    except (ProbeError, ProbeSkipped) as exc:
        return None, f"the login environment was not read: {exc}"
    if facts.get("login_env") is None:
        return None, f"the login environment was not read: {facts.get('login_env_error')}"
    return facts["login_env"].get("LD_LIBRARY_PATH"), None


def build_facts(report: dict[str, Any], servers_error: str | None, interpreter_errors: dict[str, str]) -> Facts:
    """The probe's facts from the collector's report (pure: tested without a target)."""
    files: dict[str, Any] = {}
    for path, raw in sorted((report.get("files") or {}).items()):
        entry = {**_ENTRY_DEFAULTS, **raw}
        entry.setdefault("owners", {})
        entry["name"] = library_name(path, entry.get("soname"))
        entry["version"] = version_from_name(path)
        files[path] = entry
    servers: dict[str, dict[str, list[str]]] = {}
    for key, paths in (report.get("servers") or {}).items():
        by_name: dict[str, list[str]] = {}
        for path in paths:
            by_name.setdefault(files[path]["name"] if path in files else file_name(path), []).append(path)
        servers[key] = {name: sorted(paths) for name, paths in sorted(by_name.items())}
    interpreters: dict[str, Any] = {
        name: {"libraries": sorted(spec.get("libraries") or []), "error": None}
        for name, spec in (report.get("interpreters") or {}).items()
    }
    integrity: dict[str, Any] = {name: {**spec, "error": None} for name, spec in (report.get("integrity") or {}).items()}
    for name, error in interpreter_errors.items():
        interpreters[name] = {"libraries": [], "error": error}
        integrity[name] = {"error": error}
    counts, hashing = report.get("counts") or {}, report.get("hashing") or {}
    return {
        "files": files,
        "servers": servers,
        "servers_error": servers_error,
        "interpreters": dict(sorted(interpreters.items())),
        "system": sorted(report.get("system") or []),
        "resolution": resolution_facts(report.get("resolution")),
        "integrity": dict(sorted(integrity.items())),
        "truncated": bool(report.get("truncated")),
        "volatile": {
            "libraries_read": counts.get("read", 0),
            "libraries_reused": counts.get("reused", 0),
            "files_hashed": hashing.get("hashed", 0),
            "bytes_hashed": hashing.get("hashed_bytes", 0),
            "hashes_reused": hashing.get("reused", 0),
            "files_unchecked": hashing.get("unchecked", 0),
        },
    }


def resolution_facts(raw: Any) -> dict[str, Any]:
    """The loader's picks as the facts keep them (see docs/facts.md); a collector too old to
    report them gives the error, never an empty "nothing shadowed"."""
    if not isinstance(raw, dict):
        return {"error": "the collector did not report what the loader resolves", "ld_so_conf": None,
                "interpreters": {}, "servers": {}}
    conf = raw.get("ld_so_conf") or {}
    return {
        "error": None,
        "ld_so_conf": {"dirs": [list(d) for d in conf.get("dirs") or []], "errors": list(conf.get("errors") or [])},
        "interpreters": dict(sorted((raw.get("interpreters") or {}).items())),
        "servers": dict(sorted((raw.get("servers") or {}).items())),
    }


class LibrariesProbe:
    name = "libraries"

    def collect(self, ctx: ProbeContext) -> Facts:
        # Both inputs are shared with other probes (python/cuda, processes): wait for both
        # at once rather than one after the other.
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="libraries") as pool:
            walked = pool.submit(_walk, ctx)
            outcomes = interpreter_reports(ctx)
            servers, servers_error = walked.result()
            login_path, login_error = _login_ld_library_path(ctx)
        paths = {name: _sys_path(outcome) for name, outcome in outcomes.items()}
        errors = {name: path for name, path in paths.items() if isinstance(path, str)}
        request = {
            "interpreters": {name: {"sys_path": path, "ld_library_path": login_path, "env_error": login_error}
                             for name, path in paths.items() if not isinstance(path, str)},
            "requester_globs": REQUESTER_GLOBS,
            "servers": servers,
            "wheel_globs": WHEEL_GLOBS,
            "system_dirs": list(NCCL_DIRS),
            "system_globs": SYSTEM_GLOBS,
            "focus": ctx.watch.focus,
            "max_files": MAX_LIBRARIES,
            "max_hash_bytes": MAX_HASH_BYTES,
            # Hashing stops here and resumes next snapshot (what was verified is cached),
            # so a first snapshot of a host with GBs of focus libraries ends in time.
            "budget_s": max(1.0, ctx.timeout * 0.4),
            "cache": cache_from(ctx.previous),
            "digests": digests_from(ctx.previous),
            "integrity_cache": integrity_cache_from(ctx.previous),
        }
        report = collect_json(
            ctx, "libraries_collect.py", request, what="libraries", keys=("files",),
            preludes=PRELUDES,
        )
        return build_facts(report, servers_error, errors)
