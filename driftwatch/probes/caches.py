"""The ``caches`` probe: compile and JIT caches, per top-level entry, by stat only.

A stale cache survives a reinstall of the package that filled it (FlashInfer's same-version
reinstall, a torch upgrade under ``torch_extensions``): per cache directory in
``[watch] caches`` and per top-level entry (a FlashInfer version, a ``py310_cu121`` build of
torch extensions, Triton's kernels together as ``*``), the script
``scripts/caches_collect.py`` records file count, bytes, oldest and newest mtime, the compiled
objects (``.so``/``.o``/``.cubin``) by name, size and mtime, and a digest of the whole
(path, size, mtime) listing. No file is read.

Where an environment variable moves a cache (``TRITON_CACHE_DIR`` in the login environment
or in a running server's), the directory it points to is walked too, and says which
variable of which environment led there. The walk of the configured directories does not
wait for those environments; only the moved ones do.

The previous snapshot's facts are the cache: an entry whose every directory keeps its stat
key (size, mtime, ctime, inode) had nothing added, removed or replaced (the compilers,
linkers and JIT caches create a new file and rename it, or unlink first), so it is not
walked again; ``volatile`` counts what was walked and what was reused.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from driftwatch.probes.base import Facts, ProbeContext, ProbeError, ProbeSkipped, collect_json
from driftwatch.probes.locations import CacheLayout, layout_of, relocated
from driftwatch.probes.processes import environments, observed
from driftwatch.redact import redact_env

# Top-level names that are keys, not meanings: Triton's base32 kernel hashes (upper case
# and digits, 52 characters), other hex or base32 keys, Inductor's and the CUDA driver's
# one- or two-character shards. They form one entry, "*".
HASHED_RE = (r"^(?:[0-9A-Za-z]{1,2}|[0-9A-Z]{20,}"
             r"|(?=[0-9A-Za-z]*[0-9])(?=[0-9A-Za-z]*[A-Za-z])[0-9A-Za-z]{16,})$")
HASHED = "*"
OBJECT_SUFFIXES = (".so", ".o", ".cubin", ".fatbin", ".hsaco")
MAX_NAMED = 256  # named entries per cache; more go to "*"
MAX_OBJECTS = 512  # compiled objects listed by name per entry (beyond: counted only)
MAX_DIRS = 4096  # directory keys kept per entry to skip the next walk (beyond: walk again)
MAX_OBJECTS_TOTAL = 8192
MAX_DIRS_TOTAL = 8192  # ~75 bytes each in the stored snapshot: at most ~0.6 MB
# vLLM writes what a torch.compile cache entry was keyed on beside it
# (torch_compile_cache/<hash>/rank_R_D/<prefix>/cache_key_factors.json: env, config_hash,
# code_hash, compiler_hash): read so that an entry reused under other settings names them.
KEY_FILES = ("cache_key_factors.json",)
MAX_KEY_FILES = 32
MAX_KEY_BYTES = 256 * 1024
MAX_KEY_ENV = 512
_VERSION = re.compile(r"^\d+(\.\d+)+")
_TORCH_BUILD = re.compile(r"^py(\d)(\d+)_(cu|rocm|cpu|xpu)(\d*)$")


def owner_of(layout: CacheLayout | None, entry: str) -> dict[str, Any] | None:
    """Which distribution filled this entry, and which version of it, where the layout
    says so (``~/.cache/flashinfer/0.2.5`` → flashinfer-python 0.2.5)."""
    if layout is None or layout.owner is None:
        return None
    owner: dict[str, Any] = {"package": layout.owner, "version": None}
    if layout.versioned and _VERSION.match(entry):
        owner["version"] = entry
    build = _TORCH_BUILD.match(entry) if layout.name == "torch_extensions" else None
    if build:
        major, minor, kind, number = build.groups()
        owner["python"] = f"{major}.{minor}"
        owner["cuda"] = f"{number[:-1]}.{number[-1]}" if kind == "cu" and len(number) > 1 else None
    return owner


def compile_key(raw: dict[str, Any]) -> dict[str, Any]:
    """One cache_key_factors.json as facts: the hashes, and the environment it was built
    under (values redacted like any environment's; bounded)."""
    factors = raw.get("factors") if isinstance(raw.get("factors"), dict) else {}
    env = factors.get("env") if isinstance(factors.get("env"), dict) else {}
    kept = {str(k): str(v)[:200] for k, v in sorted(env.items())[:MAX_KEY_ENV]}
    return {
        "env": redact_env(kept) if kept else {},
        **{key: factors.get(key) if isinstance(factors.get(key), str) else None
           for key in ("config_hash", "code_hash", "compiler_hash")},
        "mtime": raw.get("mtime"),
        "error": raw.get("error"),
    }


def reuse_from(previous: Facts) -> dict[str, dict[str, dict[str, Any]]]:
    """Per cache, per entry: the directory keys the previous snapshot walked."""
    reuse: dict[str, dict[str, dict[str, Any]]] = {}
    for key, cache in (previous.get("caches") or {}).items():
        for name, entry in (cache.get("entries") or {}).items() if isinstance(cache, dict) else ():
            dirs = ((entry or {}).get("volatile") or {}).get("dirs")
            if isinstance(dirs, dict) and dirs:
                reuse.setdefault(key, {})[name] = dirs
    return reuse


def parse_cache(raw: dict[str, Any], previous: dict[str, Any], layout: CacheLayout | None,
                via: list[str]) -> dict[str, Any]:
    """One cache directory's facts from the script's report; reused entries are the
    previous snapshot's."""
    entries: dict[str, Any] = {}
    for name, got in (raw.get("entries") or {}).items():
        if got.get("reused"):
            entries[name] = previous["entries"][name]
            continue
        if "skipped" in got:
            entries[name] = {"owner": owner_of(layout, name), "files": None, "truncated": got["skipped"]}
            continue
        dirs = got.pop("dirs", None)
        keys = got.pop("keys", None)
        entries[name] = {"owner": owner_of(layout, name), **got, "volatile": {"dirs": dirs}}
        if keys:
            entries[name]["keys"] = {rel: compile_key(raw_key) for rel, raw_key in keys.items()}
    return {
        "path": raw.get("path"),
        "layout": layout.name if layout else None,
        "via": via,
        "exists": bool(raw.get("exists")),
        "error": raw.get("error"),
        "truncated": raw.get("truncated"),
        "same_as": None,
        "entries": entries,
    }


def moved_caches(ctx: ProbeContext, configured: list[str]) -> tuple[dict[str, tuple[CacheLayout, list[str]]], str | None]:
    """Directories the login environment or a running server's environment moves a
    configured cache to: path → (layout, [why]); and why none could be looked for."""
    try:
        sources = environments(observed(ctx))
    except (ProbeError, ProbeSkipped) as exc:
        return {}, f"environments not read: {exc}"
    moved: dict[str, tuple[CacheLayout, list[str]]] = {}
    for path in configured:
        layout = layout_of(path)
        if layout is None:
            continue  # a directory of the user's own: nothing moves it
        for where, env in sources:
            found = relocated(layout.relocations, env)
            if found and found[1] not in configured:
                moved.setdefault(found[1], (layout, []))[1].append(f"{found[0]} ({where})")
    return moved, None


class CachesProbe:
    name = "caches"

    def collect(self, ctx: ProbeContext) -> Facts:
        configured = list(dict.fromkeys(ctx.watch.caches))
        if not configured:
            raise ProbeSkipped("no caches configured ([watch] caches)")
        reuse = reuse_from(ctx.previous)
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="caches") as pool:
            first = pool.submit(self._walk, ctx, {key: key for key in configured}, reuse, [])
            moved, locations_error = moved_caches(ctx, configured)
            report = first.result()
        raws = dict(report["roots"])
        caches = {key: parse_cache(raw, self._previous(ctx, key), layout_of(key), [])
                  for key, raw in raws.items()}
        counts = dict(report["counts"])
        if moved:
            walked = [raw["real"] for raw in raws.values() if raw.get("real")]
            more = self._walk(ctx, {path: path for path in moved}, reuse, walked)
            for key, raw in more["roots"].items():
                layout, via = moved[key]
                caches[key] = parse_cache(raw, self._previous(ctx, key), layout, via)
            raws.update(more["roots"])
            counts = {k: counts.get(k, 0) + v for k, v in more["counts"].items()}
        for key, raw in raws.items():
            if raw.get("same_as"):  # the key whose walk covered the same real directory
                caches[key]["same_as"] = next(
                    (k for k, r in raws.items() if r.get("real") == raw["same_as"] and not r.get("same_as")), None)
        return {"caches": caches, "locations_error": locations_error, "volatile": counts}

    @staticmethod
    def _previous(ctx: ProbeContext, key: str) -> dict[str, Any]:
        cache = (ctx.previous.get("caches") or {}).get(key)
        return cache if isinstance(cache, dict) else {"entries": {}}

    @staticmethod
    def _walk(ctx: ProbeContext, roots: dict[str, str], reuse: dict[str, Any], walked: list[str]) -> dict[str, Any]:
        request = {
            "roots": [{"key": key, "path": path, "reuse": reuse.get(key, {})} for key, path in roots.items()],
            "walked": walked,
            "max_entries": ctx.watch.cache_max_entries,
            # The script stops itself well inside the deadline and says so (truncated: time).
            "seconds": max(0.5, ctx.time_left * 0.5),
            "hashed_re": HASHED_RE,
            "max_named": MAX_NAMED,
            "object_suffixes": list(OBJECT_SUFFIXES),
            "max_objects": MAX_OBJECTS,
            "max_dirs": MAX_DIRS,
            "max_objects_total": MAX_OBJECTS_TOTAL,
            "max_dirs_total": MAX_DIRS_TOTAL,
            "key_files": list(KEY_FILES),
            "max_key_files": MAX_KEY_FILES,
            "max_key_bytes": MAX_KEY_BYTES,
        }
        return collect_json(ctx, "caches_collect.py", request, what="caches", keys=("roots",))
