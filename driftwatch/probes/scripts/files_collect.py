# Runs ON THE TARGET under any python3 >= 3.6, stdlib only. Reads a JSON request on
# stdin, prints one JSON document. Paths never pass through a shell.
#
# The patterns are expanded by a walk of our own with glob's rules (``**`` spans
# directories, ``*`` skips dot-names unless the pattern starts with a dot, symlinks are
# followed) and the same paths, but bounded: a directory symlink leading back to a
# directory on the walk's own path (a loop) is not entered, and the walk stops, saying so,
# after max_files regular files or max_entries directory entries. glob.iglob followed
# loops until the path grew too long (123 entries for 4 files; two loops never ended) and
# every match of a pattern was sorted before max_files was looked at.
import fnmatch
import hashlib
import json
import os
import re
import stat
import sys
import time

CHUNK = 1024 * 1024
MAGIC = re.compile(r"[*?[]")  # glob.has_magic
# Past the hashing budget a file is left unhashed, its stat still reported: the probe ends
# within its deadline with every other fact, and the next snapshot, reusing what this one
# hashed, goes on where it stopped.
OUT_OF_TIME = "not hashed: out of time"


class OutOfTime(Exception):
    pass


def sha256_of(path, deadline):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(CHUNK), b""):
            digest.update(block)
            if time.monotonic() > deadline:
                raise OutOfTime()
    return digest.hexdigest()


class Bounded(Exception):
    """The walk reached a bound; the message says which."""


class Walk:
    """The directory entries the walk may still read."""

    def __init__(self, max_entries):
        self.max_entries = max_entries
        self.left = max_entries

    def listdir(self, path):
        try:
            with os.scandir(path or ".") as scan:
                entries = sorted(scan, key=lambda entry: entry.name)
        except OSError:  # gone, not a directory, no permission: nothing matches below it
            return []
        self.left -= len(entries)
        if self.left < 0:
            raise Bounded(f"the walk stopped after reading {self.max_entries} directory entries")
        return entries


def is_dir(entry):
    try:
        return entry.is_dir()  # follows symlinks, as glob does
    except OSError:
        return False


def dir_key(path):
    try:
        st = os.stat(path or ".")
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def matches(walk, base, parts, ancestors):
    """Every path below ``base`` matching the pattern components ``parts``, depth first.
    ``ancestors``: (st_dev, st_ino) of the directories a ``**`` walk is inside."""
    if not parts:
        yield base
        return
    head, rest = parts[0], parts[1:]
    if head == "**":
        here = dir_key(base)
        if here is None:
            return
        ancestors = ancestors | {here}
        for path in matches(walk, base, rest, ancestors):  # ** spans no directory too
            yield path
        for entry in walk.listdir(base):
            if entry.name.startswith("."):
                continue
            path = os.path.join(base, entry.name)
            if not is_dir(entry):
                if not rest:
                    yield path
                continue
            if dir_key(path) in ancestors:
                continue  # a symlink back up the walk's own path: a loop
            for found in matches(walk, path, parts, ancestors):
                yield found
    elif MAGIC.search(head):
        for entry in walk.listdir(base):
            if entry.name.startswith(".") and not head.startswith("."):
                continue
            if fnmatch.fnmatchcase(entry.name, head) and (not rest or is_dir(entry)):
                for found in matches(walk, os.path.join(base, entry.name), rest, ancestors):
                    yield found
    else:
        path = os.path.join(base, head)
        if os.path.isdir(path) if rest else os.path.lexists(path):
            for found in matches(walk, path, rest, ancestors):
                yield found


def expand(patterns, limit, max_entries):
    """(path, stat or OSError) of every regular file matched, one stat per file, and why
    the walk stopped early (None when it did not)."""
    seen = []
    known = set()
    walk = Walk(max_entries)
    try:
        for pattern in patterns:
            pattern = os.path.expanduser(pattern)
            base = os.sep if pattern.startswith(os.sep) else ""
            parts = [part for part in pattern.split(os.sep) if part]
            found = []
            try:
                for path in matches(walk, base, parts, frozenset()):
                    if path in known:
                        continue
                    try:
                        st = os.stat(path)
                    except OSError as exc:
                        st = exc
                    if not isinstance(st, OSError) and not stat.S_ISREG(st.st_mode):
                        continue
                    if len(seen) + len(found) >= limit:
                        raise Bounded(f"more files matched than max_files = {limit}")
                    known.add(path)
                    found.append((path, st))
            finally:
                seen += sorted(found, key=lambda item: item[0])  # glob's order, per pattern
    except Bounded as bound:
        return seen, str(bound)
    return seen, None


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
    if time.monotonic() > request["deadline"]:
        entry["error"] = OUT_OF_TIME
        request["unhashed"] += 1
        return entry
    try:
        entry["sha256"] = sha256_of(path, request["deadline"])
        request["hashed"] += 1
    except OutOfTime:
        entry["error"] = OUT_OF_TIME
        request["unhashed"] += 1
    except OSError as exc:
        entry["error"] = exc.strerror or str(exc)
    return entry


def main():
    request = json.load(sys.stdin)
    request["hashed"] = request["reused"] = request["unhashed"] = 0
    request["deadline"] = time.monotonic() + float(request.get("budget_s", 5))
    paths, stopped = expand(request["patterns"], request["max_files"], request["max_entries"])
    files = dict((path, describe(path, st, request)) for path, st in paths)
    counts = {"hashed": request["hashed"], "reused": request["reused"], "unhashed": request["unhashed"]}
    # Where ~ expanded: hosts that log in as different users compare their files under it.
    report = {"patterns": request["patterns"], "files": files, "truncated": stopped is not None,
              "truncated_reason": stopped, "home": os.path.expanduser("~")}
    report["volatile"] = counts
    json.dump(report, sys.stdout)


main()
