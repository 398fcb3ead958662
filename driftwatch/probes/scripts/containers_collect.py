# Runs ON THE TARGET (the node, as root) under any python3 >= 3.6, stdlib only. Reads a JSON
# request on stdin (see driftwatch/probes/containers.py), prints one JSON document: for each
# containerised server, the stack inside its container as the server sees it --
#
# * interpreter: which python the server runs (its argv[0] looked up on the container's
#   PATH, a console script's #! line, the venv's pyvenv.cfg) and the sys.path that python
#   builds (PYTHONHOME/PYTHONPATH, the stdlib, site-packages, .pth path lines, user site),
#   worked out from the files, never by running anything from the image;
# * python: its distributions, by python_collect.py's own code;
# * libraries: the libraries it maps (build-id, SONAME, RECORD owners) and the focus
#   distributions' RECORD integrity, by libraries_collect.py's own code.
#
# Both collectors run unchanged in a forked child that chroot()s into /proc/PID/root: every
# absolute symlink in the image then resolves inside the image, as it does for the server,
# and never into the host's files. The collectors' sources arrive in the request and are
# executed in namespaces of their own (their `__main__` guards do not fire). A child that
# does not answer within the time left is killed and reported, the others complete.
import errno
import io
import json
import os
import select
import signal
import stat
import sys
import time

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
MAX_REPORT = 64 << 20
INTERPRETER_FLAGS = set("IsSEBbdOquvx")  # one-letter flags that take no value


def load(name, source):
    """Execute a collector's source as a module of its own and return its namespace."""
    namespace = {"__name__": "driftwatch_" + name, "__builtins__": __builtins__}
    exec(compile(source, "<%s>" % name, "exec"), namespace)
    return namespace


def read_text(path, limit=65536):
    try:
        with open(path, "rb") as handle:
            return handle.read(limit).decode("utf-8", "replace")
    except OSError:
        return None


def executable(path):
    try:
        return stat.S_ISREG(os.stat(path).st_mode) and os.access(path, os.X_OK)
    except OSError:
        return False


def which(word, env, cwd):
    if "/" in word:
        return os.path.normpath(os.path.join(cwd or "/", word))
    for directory in (env.get("PATH") or DEFAULT_PATH).split(":"):
        candidate = os.path.join(directory or ".", word)
        if executable(candidate):
            return candidate
    return None


def shebang(path):
    """The interpreter of a console script (`#!/opt/venv/bin/python3`), or None."""
    text = read_text(path, 512) or ""
    if not text.startswith("#!"):
        return None
    words = text[2:].splitlines()[0].split()
    if not words:
        return None
    if os.path.basename(words[0]) == "env" and len(words) > 1:
        return words[1]
    return words[0]


def python_version(program, exe):
    """X.Y of the interpreter: from its name (python3.11), else the one it links to, else
    the stdlib it would find; None when none says."""
    for name in (os.path.basename(program), os.path.basename(os.path.realpath(program)), os.path.basename(exe or "")):
        if name.startswith("python") and "." in name:
            version = name[len("python"):]
            if all(part.isdigit() for part in version.split(".")):
                return version
    return None


def venv_of(program):
    for directory in (os.path.dirname(program), os.path.dirname(os.path.dirname(program))):
        cfg = os.path.join(directory, "pyvenv.cfg")
        if os.path.isfile(cfg):
            values = {}
            for line in (read_text(cfg) or "").splitlines():
                key, sep, value = line.partition("=")
                if sep:
                    values[key.strip().lower()] = value.strip()
            return directory, values
    return None, {}


def landmark_prefix(program, version):
    """The prefix whose lib/pythonX.Y/os.py sits above the (real) executable, as CPython's
    getpath finds it."""
    directory = os.path.dirname(os.path.realpath(program))
    for _ in range(8):
        parent = os.path.dirname(directory)
        if version and os.path.isfile(os.path.join(parent, "lib", "python" + version, "os.py")):
            return parent
        if parent == directory:
            break
        directory = parent
    return None


def pth_paths(site):
    """Directories a site dir's .pth files add (their `import` lines are never run)."""
    out = []
    try:
        names = sorted(n for n in os.listdir(site) if n.endswith(".pth"))
    except OSError:
        return out
    for name in names[:256]:
        for line in (read_text(os.path.join(site, name)) or "").splitlines()[:1024]:
            line = line.strip()
            if not line or line.startswith(("#", "import ", "import\t")):
                continue
            path = os.path.normpath(os.path.join(site, line))
            if os.path.isdir(path) and path not in out:
                out.append(path)
    return out


def interpreter_flags(argv):
    """The one-letter flags python was started with (before -m, -c or the script)."""
    flags = set()
    for word in argv[1:]:
        if word in ("-m", "-c") or not word.startswith("-") or word == "-":
            break
        letters = word[1:]
        if set(letters) <= INTERPRETER_FLAGS:
            flags.update(letters)
        else:
            break
    return flags


def resolve(server):
    """Which interpreter the server runs and the sys.path it has (in the container's view)."""
    argv, env, cwd = server.get("argv") or [], server.get("env") or {}, server.get("cwd") or "/"
    if not argv:
        return {"error": "no command line"}
    program = which(argv[0], env, cwd)
    if program is None:
        return {"error": "%s is not on the container's PATH" % argv[0]}
    flags = set()
    if not os.path.basename(program).startswith("python"):
        interpreter = shebang(program)
        if interpreter is None:
            return {"error": "the server (%s) is not a Python program: no interpreter to read" % argv[0]}
        program = which(interpreter, env, cwd) or interpreter
    else:
        flags = interpreter_flags(argv)
    if not os.path.exists(program):
        return {"error": "%s is not in the container's image" % program}
    version = python_version(program, server.get("exe"))
    prefix, cfg = venv_of(program)
    version = version or (cfg.get("version") or cfg.get("version_info") or "")[:4].rstrip(".") or None
    home = None if "E" in flags or "I" in flags else env.get("PYTHONHOME")
    base = home.split(":")[0] if home else None
    if base is None and prefix and cfg.get("home"):
        base = landmark_prefix(os.path.join(cfg["home"], os.path.basename(program)), version) or os.path.dirname(cfg["home"])
    base = base or landmark_prefix(program, version)
    if version is None and base:
        found = sorted(n for n in os.listdir(os.path.join(base, "lib")) if n.startswith("python3.")) if os.path.isdir(os.path.join(base, "lib")) else []
        version = found[-1][len("python"):] if found else None
    if not version or not base:
        return {"error": "cannot tell which Python %s is (no stdlib found for it)" % program}
    lib = "python" + version
    path = []
    if not flags & {"E", "I"}:
        path += [p for p in (env.get("PYTHONPATH") or "").split(":") if p]
    path += [os.path.join(base, "lib", "python%s.zip" % version.replace(".", "")), os.path.join(base, "lib", lib),
             os.path.join(base, "lib", lib, "lib-dynload")]
    sites = []
    if "S" not in flags:
        system = [os.path.join(base, "lib", lib, "site-packages")]
        if base == "/usr":  # Debian's and Ubuntu's python3 packages
            system = ["/usr/local/lib/%s/dist-packages" % lib, "/usr/lib/python3/dist-packages", *system]
        if prefix:
            sites = [os.path.join(prefix, "lib", lib, "site-packages")]
            if cfg.get("include-system-site-packages", "false").lower() == "true":
                sites += system
        else:
            user_home = env.get("PYTHONUSERBASE") or os.path.join(env.get("HOME") or "/root", ".local")
            if not flags & {"s", "I"} and not env.get("PYTHONNOUSERSITE"):
                sites.append(os.path.join(user_home, "lib", lib, "site-packages"))
            sites += system
    for site in sites:
        if os.path.isdir(site):
            path += [site] + [p for p in pth_paths(site) if p not in path]
    return {"executable": program, "version": version, "prefix": prefix or base, "base_prefix": base,
            "sys_path": path, "error": None}


def inside(server, python, libraries, request):
    """In the chrooted child: the interpreter, its distributions and the mapped libraries."""
    found = resolve(server)
    out = {"interpreter": found}
    if found.get("error"):
        return out
    sys.path[:] = found["sys_path"]
    sys.path_importer_cache.clear()
    report = python["collect"]()
    report.update(executable=found["executable"], version=found["version"], prefix=found["prefix"])
    out["python"] = report
    if server.get("env", {}).get("LD_LIBRARY_PATH") is not None:
        os.environ["LD_LIBRARY_PATH"] = server["env"]["LD_LIBRARY_PATH"]
    else:
        os.environ.pop("LD_LIBRARY_PATH", None)
    lib_request = dict(request.get("libraries") or {})
    lib_request.update(server.get("libraries") or {})
    lib_request["interpreters"] = {found["executable"]: {"sys_path": found["sys_path"]}}
    lib_request["servers"] = {server["key"]: {"pid": server.get("ns_pid"), "mapped": server.get("mapped") or {}}}
    stdin, stdout = sys.stdin, sys.stdout
    sys.stdin, sys.stdout = io.StringIO(json.dumps(lib_request)), io.StringIO()
    try:
        libraries["main"]()
        out["libraries"] = json.loads(sys.stdout.getvalue())
    finally:
        sys.stdin, sys.stdout = stdin, stdout
    return out


def child(server, modules, request, write_fd):
    try:
        # Everything the collectors import is imported here, before the chroot: nothing
        # from the image is ever imported or run by this (host) interpreter.
        python, libraries = load("python", modules["python"]), load("libraries", modules["libraries"])
        os.chroot("/proc/%d/root" % server["pid"])
        os.chdir("/")
        result = inside(server, python, libraries, request)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ESRCH):
            result = {"error": "the container exited while it was read"}
        elif exc.errno in (errno.EPERM, errno.EACCES):
            result = {"error": "cannot enter the container's root (%s): driftwatch needs root on the node" % exc.strerror}
        else:
            result = {"error": "reading the container's files: %s" % (exc.strerror or exc)}
    except Exception as exc:  # noqa: BLE001  (a broken image is a fact, never a crash)
        result = {"error": "reading the container's files: %s: %s" % (type(exc).__name__, exc)}
    data = json.dumps(result).encode("utf-8", "surrogateescape")
    with os.fdopen(write_fd, "wb") as out:
        out.write(data)
    os._exit(0)


def start(server, modules, request):
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        child(server, modules, request, write_fd)
    os.close(write_fd)
    return pid, read_fd


def main():
    request = json.load(sys.stdin)
    modules = request["modules"]
    deadline = time.monotonic() + float(request.get("budget_s", 5))
    running = {}
    for server in request.get("servers") or []:
        pid, fd = start(server, modules, request)
        running[fd] = (server["key"], pid, [])
    results = {}
    while running:
        left = deadline - time.monotonic()
        ready = select.select(list(running), [], [], max(0.0, left))[0] if left > 0 else []
        if not ready:
            for fd, (key, pid, _) in running.items():
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                os.close(fd)
                results[key] = {"error": "timed out reading the container's files (a hung mount in it?)"}
            break
        for fd in ready:
            key, pid, chunks = running[fd]
            block = os.read(fd, 1 << 20)
            if block and sum(map(len, chunks)) < MAX_REPORT:
                chunks.append(block)
                continue
            del running[fd]
            os.close(fd)
            os.waitpid(pid, 0)
            try:
                results[key] = json.loads(b"".join(chunks).decode("utf-8", "replace"))
            except ValueError:
                results[key] = {"error": "the reader of the container's files died"}
    json.dump({"servers": results}, sys.stdout)


if __name__ == "__main__":
    main()
