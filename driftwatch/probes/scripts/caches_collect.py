# Runs ON THE TARGET under any python3 >= 3.6, stdlib only. Reads a JSON request on
# stdin, prints one JSON document: per cache directory, per top-level entry, the count,
# bytes, oldest and newest mtime and a digest of its (path, size, mtime) listing. Nothing
# is read but directory listings and stat; symlinks are counted, never followed; every
# walk is bounded in entries and in time. Paths never pass through a shell.
import getpass
import hashlib
import json
import os
import re
import stat
import sys
import time

CHECK_EVERY = 256  # entries between two looks at the clock


class Budget:
    """What one run may still spend: entries per cache, wall time, and the size of the
    per-entry details (object list, directory keys) sent back."""

    def __init__(self, request):
        self.max_entries = int(request["max_entries"])
        self.deadline = time.monotonic() + float(request["seconds"])
        self.objects = int(request["max_objects_total"])
        self.dirs = int(request["max_dirs_total"])
        self.visited = 0  # in this run
        self.in_root = 0  # in the cache being walked: max_entries bounds each cache

    def visit(self):
        """None to go on, else why the walk stops here."""
        self.visited += 1
        self.in_root += 1
        if self.in_root > self.max_entries:
            return "entries"
        if self.in_root % CHECK_EVERY == 0 and self.out_of_time():
            return "time"
        return None

    def out_of_time(self):
        return time.monotonic() > self.deadline


def printable(text):
    """``text`` as valid UTF-8: a file name's undecodable bytes become U+FFFD."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return text


def expand(path):
    if "$USER" in path or "${USER}" in path:
        try:
            user = getpass.getuser()
        except (KeyError, OSError):  # no USER and no passwd entry: leave the path as given
            user = "$USER"
        path = path.replace("${USER}", user).replace("$USER", user)
    return os.path.expanduser(path)


def key_of(st):
    """A short fingerprint of a stat key: a directory whose entries change gets a new mtime
    and ctime; a file rewritten gets a new size, mtime or ctime; a replaced one a new inode."""
    size = st.st_size if stat.S_ISREG(st.st_mode) else 0
    raw = f"{size}:{st.st_mtime_ns}:{st.st_ctime_ns}:{st.st_ino}"
    return hashlib.blake2b(raw.encode(), digest_size=8).hexdigest()


class Entry:
    """The facts of one top-level entry, built while its members are walked."""

    def __init__(self, request):
        self.files = self.bytes = self.symlinks = self.unreadable = 0
        self.oldest = self.newest = None
        self.listing = []
        self.objects = {}
        self.object_count = 0
        self.dirs = {}
        self.first_unreadable = None
        self.truncated = None
        self.suffixes = tuple(request["object_suffixes"])
        self.max_objects = int(request["max_objects"])
        self.max_dirs = int(request["max_dirs"])
        # Small files that record what a cache entry was built from (vLLM's
        # cache_key_factors.json): read, bounded, and returned parsed.
        self.key_names = set(request.get("key_files") or [])
        self.max_keys = int(request.get("max_key_files") or 0)
        self.max_key_bytes = int(request.get("max_key_bytes") or 0)
        self.key_paths = []
        self.root = None

    def add_file(self, rel, st):
        self.files += 1
        self.bytes += st.st_size
        mtime = st.st_mtime
        self.oldest = mtime if self.oldest is None or mtime < self.oldest else self.oldest
        self.newest = mtime if self.newest is None or mtime > self.newest else self.newest
        self.listing.append(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}")
        if rel.rsplit("/", 1)[-1] in self.key_names and len(self.key_paths) < self.max_keys:
            self.key_paths.append((rel, st))
        if rel.endswith(self.suffixes):
            self.object_count += 1
            if self.objects is not None and len(self.objects) < self.max_objects:
                self.objects[printable(rel)] = [st.st_size, mtime]
            else:
                self.objects = None

    def add_key(self, rel, st, budget):
        if self.dirs is None:
            return
        if len(self.dirs) >= self.max_dirs or budget.dirs <= 0 or printable(rel) != rel:
            self.dirs = None  # too many to verify cheaply: the next run walks again
            return
        budget.dirs -= 1
        self.dirs[rel] = key_of(st)

    def unreadable_dir(self, rel):
        self.unreadable += 1
        if self.first_unreadable is None:
            self.first_unreadable = printable(rel)

    def keys(self):
        """Each key file's JSON (an object), or why it could not be read."""
        found = {}
        for rel, st in sorted(self.key_paths):
            if st.st_size > self.max_key_bytes:
                found[printable(rel)] = {"error": "not read: too large", "mtime": st.st_mtime}
                continue
            try:
                with open(os.path.join(self.root, rel), "rb") as handle:
                    data = json.loads(handle.read(self.max_key_bytes + 1).decode("utf-8", "replace"))
            except (OSError, ValueError) as exc:
                found[printable(rel)] = {"error": type(exc).__name__ + ": " + str(exc)[:200], "mtime": st.st_mtime}
                continue
            found[printable(rel)] = {"factors": data if isinstance(data, dict) else None, "mtime": st.st_mtime,
                                     "error": None if isinstance(data, dict) else "not a JSON object"}
        return found

    def facts(self, budget):
        self.listing.sort()
        digest = hashlib.sha256("\n".join(self.listing).encode("utf-8", "surrogateescape")).hexdigest()
        objects = self.objects
        if objects is not None and len(objects) > budget.objects:
            objects = None
        if objects is not None:
            budget.objects -= len(objects)
        return {
            "files": self.files, "bytes": self.bytes, "oldest": self.oldest, "newest": self.newest,
            "digest": digest, "objects": objects, "object_count": self.object_count,
            "symlinks": self.symlinks, "unreadable": self.unreadable,
            "first_unreadable": self.first_unreadable, "truncated": self.truncated,
            # A truncated walk proves nothing about what it did not see.
            "dirs": self.dirs if self.truncated is None else None,
            "keys": self.keys() if self.key_names else None,
        }


def walk(root, members, entry, budget):
    """Every member (a top-level name) and everything below it, lstat only."""
    stack = []
    for name in members:
        path = os.path.join(root, name)
        try:
            st = os.lstat(path)
        except OSError:
            continue  # removed since the listing
        entry.add_key(name, st, budget)
        if stat.S_ISDIR(st.st_mode):
            stack.append((path, name))
        elif stat.S_ISLNK(st.st_mode):
            entry.symlinks += 1
        elif stat.S_ISREG(st.st_mode):
            entry.add_file(name, st)
    while stack:
        path, rel = stack.pop()
        try:
            with os.scandir(path) as listing:
                children = list(listing)
        except OSError:
            entry.unreadable_dir(rel)
            continue
        for child in children:
            stop = budget.visit()
            if stop:
                entry.truncated = stop
                return
            child_rel = rel + "/" + child.name
            try:
                if child.is_symlink():
                    entry.symlinks += 1
                elif child.is_dir(follow_symlinks=False):
                    entry.add_key(child_rel, child.stat(follow_symlinks=False), budget)
                    stack.append((child.path, child_rel))
                elif child.is_file(follow_symlinks=False):
                    entry.add_file(child_rel, child.stat(follow_symlinks=False))
            except OSError:
                continue  # removed while we looked


def unchanged(root, members, known):
    """True when the entry's members and every directory below them keep the stat keys of
    the previous snapshot: nothing was added, removed or replaced, so no listing is read."""
    if not known or set(members) != {rel for rel in known if "/" not in rel}:
        return False
    for rel, key in known.items():
        try:
            if key_of(os.lstat(os.path.join(root, rel))) != key:
                return False
        except OSError:
            return False
    return True


def group(names, hashed, max_named):
    """Top-level names → entries: each name its own entry, except hash-named ones (Triton's
    per-kernel keys, two-character shards) which together are the entry "*"."""
    entries = {}
    for name in sorted(names):
        if hashed.match(name) or len(entries) >= max_named:
            entries.setdefault("*", []).append(name)
        else:
            entries[name] = [name]
    return entries


def describe_root(spec, request, budget, counts, walked):
    path = expand(spec["path"])
    out = {"path": path, "real": None, "exists": False, "error": None, "truncated": None, "entries": {}}
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return out
    except OSError as exc:  # a symlink loop, a directory above we may not search
        out["exists"] = os.path.lexists(path)
        out["error"] = exc.strerror or str(exc)
        return out
    out["exists"] = True
    out["real"] = os.path.realpath(path)
    if not stat.S_ISDIR(st.st_mode):
        out["error"] = "not a directory"
        return out
    if out["real"] in walked:  # configured twice, or moved to where another cache is
        out["same_as"] = out["real"]
        return out
    walked.add(out["real"])
    try:
        names = os.listdir(path)
    except OSError as exc:
        out["error"] = exc.strerror or str(exc)
        return out
    hashed = re.compile(request["hashed_re"])
    budget.in_root = 0
    for name, members in group(names, hashed, int(request["max_named"])).items():
        if not out["truncated"] and budget.out_of_time():
            out["truncated"] = "time"
        if out["truncated"]:
            out["entries"][name] = {"skipped": out["truncated"]}
            continue
        known = (spec.get("reuse") or {}).get(name)
        if unchanged(path, members, known):
            out["entries"][name] = {"reused": True}
            counts["reused"] += 1
            continue
        entry = Entry(request)
        entry.root = path
        walk(path, members, entry, budget)
        out["entries"][printable(name)] = entry.facts(budget)
        counts["walked"] += 1
        out["truncated"] = entry.truncated
    return out


def main():
    request = json.load(sys.stdin)
    budget = Budget(request)
    counts = {"walked": 0, "reused": 0}
    roots = {}
    walked = set(request.get("walked") or [])
    for spec in request["roots"]:
        try:
            roots[spec["key"]] = describe_root(spec, request, budget, counts, walked)
        except Exception as exc:  # noqa: BLE001  (one bad directory never costs the others)
            roots[spec["key"]] = {"path": spec["path"], "error": f"{type(exc).__name__}: {exc}"}
    counts["visited"] = budget.visited
    json.dump({"roots": roots, "counts": counts}, sys.stdout)


main()
