# Runs ON THE TARGET under any python3 >= 3.6, stdlib only. Reads a JSON request on
# stdin, prints one JSON document. Paths never pass through a shell.
import glob
import hashlib
import json
import os
import stat
import sys

CHUNK = 1024 * 1024


def sha256_of(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def expand(patterns, limit):
    """(path, stat or OSError) of every regular file matched, one stat per file."""
    seen = []
    known = set()
    for pattern in patterns:
        for path in sorted(glob.iglob(os.path.expanduser(pattern), recursive=True)):
            if path in known:
                continue
            try:
                st = os.stat(path)
            except OSError as exc:
                st = exc
            if not isinstance(st, OSError) and not stat.S_ISREG(st.st_mode):
                continue
            if len(seen) >= limit:
                return seen, True
            known.add(path)
            seen.append((path, st))
    return seen, False


def describe(path, st, request):
    if isinstance(st, OSError):
        return {"error": st.strerror or str(st)}
    entry = {
        "size": st.st_size,
        "mtime": st.st_mtime,
        "mode": format(stat.S_IMODE(st.st_mode), "04o"),
        "sha256": None,
        "error": None,
        "volatile": {"mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns, "inode": st.st_ino},
    }
    cached = request["cache"].get(path)
    # Same size, mtime, ctime and inode as last time: the content cannot have changed
    # without one of them moving (ctime catches writes that reset mtime).
    if cached and cached[:4] == [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]:
        entry["sha256"] = cached[4]
        request["reused"] += 1
        return entry
    if st.st_size > request["max_hash_bytes"]:
        entry["error"] = "not hashed: too large"
        return entry
    try:
        entry["sha256"] = sha256_of(path)
        request["hashed"] += 1
    except OSError as exc:
        entry["error"] = exc.strerror or str(exc)
    return entry


def main():
    request = json.load(sys.stdin)
    request["hashed"] = request["reused"] = 0
    paths, truncated = expand(request["patterns"], request["max_files"])
    files = dict((path, describe(path, st, request)) for path, st in paths)
    counts = {"hashed": request["hashed"], "reused": request["reused"]}
    report = {"patterns": request["patterns"], "files": files, "truncated": truncated}
    report["volatile"] = counts
    json.dump(report, sys.stdout)


main()
