"""Watched files: size, mtime, mode and sha256 of every file the globs match on the target.

Globs are expanded by a small stdlib script run by the target's python, fed on stdin, so
no path ever passes through a shell. The previous snapshot's digests are the hash cache:
a file whose size, mtime, ctime and inode are unchanged is not read again, and hashing
stops at half the probe's time (the files left are ``not hashed: out of time``, hashed by a
later snapshot). The walk never enters a symlink loop and stops at ``max_files`` files or
``ENTRIES_PER_FILE`` times as many directory entries, recording ``truncated`` and
``truncated_reason``.
"""

from __future__ import annotations


from driftwatch.probes.base import Facts, ProbeContext, ProbeSkipped, collect_json

# Directory entries the walk may read per file it may record: room for trees where few
# names match (a site-packages walked for one package's *.so), yet a bound.
ENTRIES_PER_FILE = 50


def cache_from(previous: Facts) -> dict[str, list[object]]:
    """The stat key and digest of every file hashed in the previous snapshot."""
    cache: dict[str, list[object]] = {}
    for path, entry in (previous.get("files") or {}).items():
        vol = entry.get("volatile") or {}
        if entry.get("sha256") and "ctime_ns" in vol:
            key = [entry["size"], vol.get("mtime_ns"), vol["ctime_ns"], vol.get("inode")]
            cache[path] = [*key, entry["sha256"]]
    return cache


class FilesProbe:
    name = "files"

    def collect(self, ctx: ProbeContext) -> Facts:
        if not ctx.watch.files:
            raise ProbeSkipped("no files configured ([watch] files)")
        request = {
            "patterns": ctx.watch.files,
            "max_hash_bytes": ctx.watch.max_hash_bytes,
            "max_files": ctx.watch.max_files,
            "max_entries": ENTRIES_PER_FILE * ctx.watch.max_files,
            "cache": cache_from(ctx.previous),
            # Hashing stops at half the time left (the walk, the stat of every file and the
            # answer need the rest): a file left over is "not hashed: out of time".
            "budget_s": max(0.5, ctx.time_left * 0.5),
        }
        return collect_json(ctx, "files_collect.py", request, what="files", keys=("files",))

