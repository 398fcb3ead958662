# Runs ON THE TARGET under any python3 >= 3.6, stdlib only, after the prelude
# elf_identity.py. Reads a JSON request on stdin (see driftwatch/probes/libraries.py),
# prints one JSON document:
#
# * files: who each shared library is -- size, mtime, GNU build-id, SONAME and the
#   distributions whose RECORD lists it -- for every library a watched server maps, the
#   NCCL/CUDA libraries in each watched interpreter's site-packages (nvidia/*/lib) and
#   libnccl in the system library directories;
# * integrity: for each focus distribution, its native libraries and Python sources whose
#   sha256 no longer matches its RECORD, the ones missing, and the ones another
#   distribution claims too (with whose copy is on disk);
# * resolution: for each library name an interpreter's nvidia wheels ship, the copy the
#   dynamic loader picks for the wheel and torch libraries that need it (under the login
#   environment's LD_LIBRARY_PATH, the prelude ld_resolve.py), and for each server the
#   search step that made it map another copy than its wheel's.
#
# The previous snapshot's stat keys (size, mtime_ns, ctime_ns, inode) are the cache: an
# unchanged file is never opened again. Paths never pass through a shell; every read is
# bounded; a file that is unreadable, not ELF or replaced while being read is recorded so.
import base64
import csv
import errno
import glob
import hashlib
import json
import os
import re
import stat
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:  # for type checkers only: the prelude is sent first, in the same script
    from driftwatch.probes.scripts.elf_identity import ElfError, elf_identity  # noqa: TC004
    from driftwatch.probes.scripts.ld_resolve import LdConf, resolve  # noqa: TC004

CHUNK = 1 << 20
MAX_RECORD = 16 << 20  # a RECORD file read (torch's is ~2 MB)
NATIVE = re.compile(r"\.so(\.[0-9][0-9.]*)?$")
DELETED = " (deleted)"
CHANGED = "changed while being read"


class Changed(Exception):
    """The file's stat key moved while it was read: what was read is not the file."""


def stat_key(st):
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def stat_volatile(st):
    return {"mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns, "inode": st.st_ino}


def undeleted(path):
    """The path without the " (deleted)" the kernel appends to a removed mapping."""
    return path[: -len(DELETED)] if path.endswith(DELETED) else path  # noqa: FURB188  (3.9+ only)


def reason(exc):
    return exc.strerror or str(exc)


def normalize(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def open_regular(path):
    """Open for reading without ever blocking: a FIFO swapped in after the stat would
    otherwise wait for a writer (O_NONBLOCK changes nothing for a regular file)."""
    return os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb")


def fingerprint(value):
    return hashlib.blake2b(json.dumps(value).encode(), digest_size=8).hexdigest()


class Run:
    """The request, the caches built from the previous snapshot and this run's counts."""

    def __init__(self, request):
        self.request = request
        self.cache = request.get("cache") or {}
        self.digests = request.get("digests") or {}
        self.deadline = time.monotonic() + float(request.get("budget_s", 5))
        self.counts = {"read": 0, "reused": 0}
        self.hashing = {"hashed": 0, "hashed_bytes": 0, "reused": 0, "unchecked": 0}
        self.files = {}
        self.truncated = False
        self.sites = {}

    def site(self, path):
        if path not in self.sites:
            self.sites[path] = Site(path)
        return self.sites[path]


# ---- library identity ---------------------------------------------------------------


def identify(run, key, open_path):
    """The entry of one library under ``key`` (the path the facts use), read from
    ``open_path`` (the same path, or /proc/PID/map_files/… for a deleted mapping)."""
    try:
        st = os.stat(open_path)
    except OSError as exc:
        return {"error": reason(exc)}
    if not stat.S_ISREG(st.st_mode):
        return {"error": "not a regular file"}
    entry = {"size": st.st_size, "mtime": st.st_mtime, "build_id": None, "soname": None, "error": None,
             "volatile": stat_volatile(st)}
    cached = run.cache.get(key)
    if cached and cached[:4] == stat_key(st):
        entry["build_id"], entry["soname"], entry["error"] = cached[4:7]
        if len(cached) > 7 and cached[7] is not None:
            entry["dynamic"] = cached[7]
        run.counts["reused"] += 1
        return entry
    run.counts["read"] += 1
    try:
        with open_regular(open_path) as handle:
            if stat_key(os.fstat(handle.fileno())) != stat_key(st):
                raise Changed()
            entry.update(elf_identity(handle))
            entry["dynamic"] = dict((k, v) for k, v in entry["dynamic"].items() if v)
        if stat_key(os.stat(open_path)) != stat_key(st):
            raise Changed()
    except Changed:
        entry.update(build_id=None, soname=None, error=CHANGED)
        entry.pop("dynamic", None)
    except ElfError as exc:
        entry["error"] = str(exc)
    except OSError as exc:
        entry["error"] = reason(exc)
    return entry


def add_library(run, key, open_path=None):
    """Describe ``key`` once per run; False when the bound on libraries is reached."""
    if key in run.files:
        return True
    if len(run.files) >= run.request.get("max_files", 4096):
        run.truncated = True
        return False
    run.files[key] = identify(run, key, open_path or key)
    return True


def server_libraries(run, server):
    keys = []
    for path, address in sorted((server.get("mapped") or {}).items()):
        open_path = None
        if path.endswith(DELETED):  # replaced or removed on disk: read the copy the server maps
            open_path = map_file(server.get("pid"), address)
        if not add_library(run, path, open_path):
            break
        keys.append(path)
    return keys


def map_file(pid, address):
    """/proc/PID/map_files/START-END for a maps address range (maps pads with zeros,
    map_files does not); a path that cannot exist when the range is not one."""
    start, _, end = str(address).partition("-")
    try:
        return "/proc/{}/map_files/{:x}-{:x}".format(int(pid), int(start, 16), int(end, 16))
    except (TypeError, ValueError):
        return "/proc/self/map_files/-"


def wheel_libraries(run, sites, globs="wheel_globs"):
    """The libraries the request's ``globs`` match in the sites (real paths, described)."""
    keys = []
    for site in sites:
        for pattern in run.request.get(globs) or []:
            for path in sorted({os.path.realpath(p) for p in glob.glob(os.path.join(glob.escape(site), pattern))}):
                if os.path.isfile(path) and path not in keys and add_library(run, path):
                    keys.append(path)
    return keys


def system_libraries(run):
    dirs = list(run.request.get("system_dirs") or [])
    dirs += [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") if d]
    keys = []
    for directory in dirs:
        for pattern in run.request.get("system_globs") or []:
            for path in sorted(glob.glob(os.path.join(glob.escape(directory), pattern))):
                real = os.path.realpath(path)
                if os.path.isfile(real) and real not in keys and add_library(run, real):
                    keys.append(real)
    return keys


# ---- what the loader resolves ---------------------------------------------------------


def library_name(path, entry):
    """What a loader asks for: the SONAME, else the file name (libraries.py's library_name)."""
    return (entry or {}).get("soname") or undeleted(path).rsplit("/", 1)[-1]


def shipped(run, paths):
    """{library name: its path} of wheel libraries, the first copy of a name in import order."""
    names = {}
    for path in paths:
        names.setdefault(library_name(path, run.files.get(path)), path)
    return names


def needing(run, requesters, names):
    """(requester, name) for every DT_NEEDED of the requesters that a wheel ships."""
    for path in requesters:
        for name in ((run.files.get(path) or {}).get("dynamic") or {}).get("needed") or []:
            if name in names:
                yield path, name


def resolved_entry(run, name, wheel, requester, env, conf):
    entry = run.files.get(requester) or {}
    found = resolve(name, requester, entry.get("dynamic"), env, conf)
    if found["path"] and found["path"] != wheel:
        add_library(run, found["path"])
    return {"wheel": wheel, "needed_by": requester, "path": found["path"], "via": found["via"], "dir": found["dir"],
            "requester_runpath": (entry.get("dynamic") or {}).get("runpath"),
            "requester_rpath": (entry.get("dynamic") or {}).get("rpath")}


def interpreter_resolution(run, spec, wheels, requesters, conf):
    """{name: what the loader picks for it} for the interpreter's wheel-shipped names: a
    name resolved away from its wheel copy by any requester wins over the agreeing ones."""
    if spec.get("env_error"):
        return {"error": spec["env_error"], "libraries": {}}
    names = shipped(run, wheels)
    out = {}
    for requester, name in needing(run, wheels + requesters, names):
        found = resolved_entry(run, name, names[name], requester, spec.get("ld_library_path"), conf)
        if name not in out or out[name]["path"] == names[name] != found["path"]:
            out[name] = found
    return {"error": None, "ld_library_path": spec.get("ld_library_path"), "libraries": out}


def server_resolution(run, server, mapped, wheel_names, conf):
    """{name: why the server maps this copy} for each library it maps that a wheel ships
    elsewhere: the first mapped library needing it, resolved under the server's environment."""
    out = {}
    for path in mapped:
        name = library_name(path, run.files.get(path))
        wheel = wheel_names.get(name)
        if wheel is None or undeleted(path) == wheel or name in out:
            continue
        requester = next((r for r, n in needing(run, mapped, {name: None}) if n == name), None)
        if requester is None:
            out[name] = {"wheel": wheel, "mapped": path, "needed_by": None, "via": "dlopen or LD_PRELOAD"}
            continue
        found = resolved_entry(run, name, wheel, requester, server.get("ld_library_path"), conf)
        out[name] = dict(found, mapped=path)
    return out


def resolution(run, request, interpreters, wheels, servers):
    conf = LdConf()
    out = {"ld_so_conf": {"dirs": [[d, f] for d, f in conf.dirs], "errors": conf.errors}, "interpreters": {},
           "servers": {}}
    wheel_names = {}
    for name, sites in interpreters.items():
        # Libraries that load the wheels' ones (torch/lib/*.so*), for their DT_NEEDED and RUNPATH.
        requesters = wheel_libraries(run, sites, "requester_globs")
        spec = (request.get("interpreters") or {}).get(name) or {}
        out["interpreters"][name] = interpreter_resolution(run, spec, wheels[name], requesters, conf)
        for lib, path in shipped(run, wheels[name]).items():
            wheel_names.setdefault(lib, path)
    for key, mapped in servers.items():
        server = (request.get("servers") or {}).get(key) or {}
        out["servers"][key] = server_resolution(run, server, mapped, wheel_names, conf)
    return out


# ---- distributions and their RECORDs -------------------------------------------------


class Site:
    """One site-packages directory: its distributions (from the dist-info names) and
    RECORD rows, read at most once per run."""

    def __init__(self, path):
        self.path = path
        self.dists = []  # (normalized name, version, dist-info path), by name
        try:
            names = sorted(os.listdir(path))
        except OSError:
            names = []
        for name in names:
            if name.endswith(".dist-info"):
                project, _, version = name[: -len(".dist-info")].partition("-")
                self.dists.append((normalize(project), version, os.path.join(path, name)))
        self.records = {}
        self.checked_rows = {}
        self.claims = None

    def record(self, dist_info):
        """[(relative path, "sha256=…")] of a RECORD; None when it cannot be read whole."""
        if dist_info not in self.records:
            self.records[dist_info] = parse_record(read_record(os.path.join(dist_info, "RECORD")))
        return self.records[dist_info]

    def checked(self, dist_info):
        """The RECORD rows of a distribution that integrity checks (see checked_files)."""
        if dist_info not in self.checked_rows:
            self.checked_rows[dist_info] = checked_files(self.record(dist_info) or [])
        return self.checked_rows[dist_info]

    def claimants(self, wanted):
        """{relative path: {distribution: (version, hash)}} for the paths in ``wanted``,
        over every distribution's RECORD in this directory (one scan per run; only the
        lines of wanted paths are parsed)."""
        if self.claims is None:
            self.claims = {}
            for name, version, dist_info in self.dists:
                rows = self.records.get(dist_info)
                if rows is None:
                    rows = parse_record(read_record(os.path.join(dist_info, "RECORD")), wanted)
                for rel, digest in rows or []:
                    if rel in wanted:
                        self.claims.setdefault(rel, {})[name] = (version, digest)
        return self.claims


def read_record(path):
    """The text of a RECORD file, or None when unreadable, not a file or past the size bound."""
    try:
        with open_regular(path) as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                return None
            data = handle.read(MAX_RECORD + 1)
    except OSError:
        return None
    return None if len(data) > MAX_RECORD else data.decode("utf-8", "replace")


def parse_record(text, wanted=None):
    """[(path, hash field)] of a RECORD's text, only the paths in ``wanted`` when given.
    A path holding a comma is quoted (csv); the rest split at their first comma."""
    if text is None:
        return None
    rows = []
    for line in text.splitlines():
        if line.startswith('"'):
            row = next(csv.reader([line]), [])
        else:
            rel, _, rest = line.partition(",")
            if wanted is not None and rel not in wanted:
                continue
            row = [rel, rest.partition(",")[0]]
        if len(row) >= 2 and row[0] and (wanted is None or row[0] in wanted):
            rows.append((row[0], row[1]))
    return rows


def site_dirs(sys_path):
    """The directories of an interpreter's sys.path holding distributions, as real paths,
    in import order (the first copy of a distribution is the one that is imported)."""
    sites = []
    for entry in sys_path:
        try:
            names = os.listdir(entry)
        except OSError:
            continue
        real = os.path.realpath(entry)
        if real not in sites and any(name.endswith(".dist-info") for name in names):
            sites.append(real)
    return sites


def owners(run, path, sites):
    """{distribution: version} of every RECORD (in the watched sites) listing ``path``."""
    path = undeleted(path)
    for site in sites:
        if path.startswith(site + os.sep):
            rel = path[len(site) + 1:]
            claims = run.site(site).claimants(run.wanted.get(site, set())).get(rel) or {}
            return {name: version for name, (version, _) in claims.items()}
    return {}


# ---- integrity of the focus distributions --------------------------------------------


def record_hex(digest):
    """The hex sha256 of a RECORD hash field ("sha256=<urlsafe base64>"), or None."""
    algorithm, _, value = digest.partition("=")
    if algorithm != "sha256" or not value:
        return None
    try:
        return base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)).hex()
    except (ValueError, TypeError):
        return None


def record_field(hexdigest):
    """A hex sha256 as RECORD writes it, so RECORD fields compare as plain strings."""
    return "sha256=" + base64.urlsafe_b64encode(bytes.fromhex(hexdigest)).rstrip(b"=").decode()


def checked_files(rows):
    """RECORD rows worth hashing: native libraries and Python sources inside the site,
    with a sha256 recorded."""
    out = []
    for rel, digest in rows:
        if not digest.startswith("sha256=") or rel.startswith("/"):
            continue
        if (rel.endswith(".py") or NATIVE.search(rel)) and "/../" not in "/" + rel + "/":
            out.append((rel, digest))
    return out


def sha256_file(run, path, st):
    """The file's sha256 (hex); None when not read (too large, or past the time budget)."""
    if st.st_size > run.request.get("max_hash_bytes", 1 << 30) or time.monotonic() > run.deadline:
        return None
    digest = hashlib.sha256()
    read = 0
    with open_regular(path) as handle:
        if stat_key(os.fstat(handle.fileno())) != stat_key(st):
            raise Changed()
        while True:
            block = handle.read(CHUNK)
            if not block:
                break
            read += len(block)
            if read > st.st_size:
                raise Changed()
            if time.monotonic() > run.deadline:
                return None
            digest.update(block)
    if read != st.st_size or stat_key(os.stat(path)) != stat_key(st):
        raise Changed()
    run.hashing["hashed"] += 1
    run.hashing["hashed_bytes"] += read
    return digest.hexdigest()


def on_disk(run, path, st, verified):
    """The file's RECORD-style sha256 field: from the digest cache (same stat key), the
    expected one when it was ``verified`` with this stat key before, else read now (None
    when it cannot be read in bounds)."""
    cached = run.digests.get(path)
    if cached and cached[:4] == stat_key(st):
        run.hashing["reused"] += 1
        return record_field(cached[4])
    if verified is not None:
        run.hashing["reused"] += 1
        return verified
    digest = sha256_file(run, path, st)
    if digest is None:
        return None
    run.digests[path] = stat_key(st) + [digest]
    return record_field(digest)


def check_distribution(run, site, dist, previous, report):
    """Compare one focus distribution's files with its RECORD; returns what to remember
    of it: the fingerprint of its Python sources' stat keys when all of them were
    verified, and a fingerprint per native library verified."""
    name, version, dist_info = dist
    claims = site.claimants(run.wanted.get(site.path, set()))
    stats = []
    for rel, expected in site.checked(dist_info):
        path = os.path.join(site.path, rel)
        try:
            stats.append((rel, expected, path, os.stat(path)))
        except OSError as exc:
            stats.append((rel, expected, path, exc))
    py_print = fingerprint([[rel, None if isinstance(st, OSError) else stat_key(st)]
                            for rel, _, _, st in stats if rel.endswith(".py")])
    py_same = previous.get("py") == py_print
    good_before = set(previous.get("native") or [])
    good_now, py_complete = [], True
    for rel, expected, path, st in stats:
        python = rel.endswith(".py")
        if isinstance(st, OSError):
            where = "missing" if st.errno in (errno.ENOENT, errno.ENOTDIR) else "unreadable"
            report[where][path] = {"distribution": name, "error": None if where == "missing" else reason(st)}
            continue
        mark = None if python else fingerprint([rel] + stat_key(st))
        verified = py_same if python else mark in good_before
        try:
            digest = on_disk(run, path, st, expected if verified else None)
        except (Changed, OSError) as exc:
            report["unreadable"][path] = {"distribution": name,
                                          "error": CHANGED if isinstance(exc, Changed) else reason(exc)}
            py_complete = py_complete and not python
            continue
        if digest is None:
            run.hashing["unchecked"] += 1
            py_complete = py_complete and not python
            continue
        if digest == expected and not python:
            good_now.append(mark)
        record_sharing(report, path, st, name, version, expected, digest, claims.get(rel) or {})
    return {"py": py_print if py_complete else None, "native": good_now}


def record_sharing(report, path, st, name, version, expected, digest, claims):
    """File the verdict on one file: modified (nobody's copy), or shared (another
    distribution claims it with other content), with whose copy is on disk."""
    others = {other: claim for other, claim in claims.items() if other != name and claim[1] != expected}
    holder = name if digest == expected else next(
        (other for other, claim in others.items() if claim[1] == digest), None)
    if holder is None:
        report["modified"][path] = {"distribution": name, "size": st.st_size, "mtime": st.st_mtime,
                                    "sha256": record_hex(digest), "expected_sha256": record_hex(expected),
                                    "volatile": stat_volatile(st)}
    if others:
        shared = report["shared"].setdefault(path, {"claimed_by": {}, "on_disk": holder,
                                                    "sha256": record_hex(digest), "size": st.st_size,
                                                    "volatile": stat_volatile(st)})
        shared["claimed_by"][name] = version
        shared["claimed_by"].update((other, claim[0]) for other, claim in others.items())


def integrity(run, interpreter, sites, focus):
    report = {"distributions": {}, "modified": {}, "missing": {}, "unreadable": {}, "shared": {}}
    previous = (run.request.get("integrity_cache") or {}).get(interpreter) or {}
    cache = {}
    seen = set()
    for site_path in sites:  # import order: the first copy of a distribution is the one used
        site = run.site(site_path)
        for dist in site.dists:
            if dist[0] in focus and dist[0] not in seen:
                seen.add(dist[0])
                report["distributions"][dist[0]] = dist[1]
                cache[dist[0]] = check_distribution(run, site, dist, previous.get(dist[0]) or {}, report)
    report["volatile"] = {"cache": cache}
    return report


def wanted_paths(run, sites, focus, libraries):
    """Per site, the relative paths whose claimants matter: every checked file of a focus
    distribution and every library found there."""
    for site_path in sites:
        site = run.site(site_path)
        wanted = run.wanted.setdefault(site_path, set())
        for name, _, dist_info in site.dists:
            if name in focus:
                wanted.update(rel for rel, _ in site.checked(dist_info))
        for path in libraries:
            path = undeleted(path)
            if path.startswith(site_path + os.sep):
                wanted.add(path[len(site_path) + 1:])


def main():
    request = json.load(sys.stdin)
    run = Run(request)
    run.wanted = {}
    focus = {normalize(name) for name in request.get("focus") or []}
    interpreters = {name: site_dirs(spec.get("sys_path") or [])
                    for name, spec in (request.get("interpreters") or {}).items()}
    all_sites = []
    for sites in interpreters.values():
        all_sites += [site for site in sites if site not in all_sites]
    servers = {key: server_libraries(run, server) for key, server in (request.get("servers") or {}).items()}
    wheels = {name: wheel_libraries(run, sites) for name, sites in interpreters.items()}
    system = system_libraries(run)
    resolved = resolution(run, request, interpreters, wheels, servers)
    wanted_paths(run, all_sites, focus, list(run.files))
    for path, entry in run.files.items():
        if "error" in entry and len(entry) == 1:  # not even a stat: nothing to own
            continue
        entry["owners"] = owners(run, path, all_sites)
    report = {
        "files": run.files,
        "servers": servers,
        "interpreters": {name: {"sites": interpreters[name], "libraries": wheels[name]} for name in interpreters},
        "system": system,
        "resolution": resolved,
        "integrity": {name: integrity(run, name, sites, focus) for name, sites in interpreters.items()},
        "truncated": run.truncated,
        "counts": run.counts,
        "hashing": run.hashing,
    }
    json.dump(report, sys.stdout)


if __name__ == "__main__":  # containers_collect.py runs this code in a namespace of its own
    main()
