# driftwatch target-side prelude (any python3 >= 3.6, stdlib only), sent ahead of
# libraries_collect.py: which file the dynamic loader (glibc's ld.so) would load for a
# DT_NEEDED name of a library, and why.
#
# ld.so(8) searches, for a name without a slash: the requesting object's DT_RPATH (only
# when it has no DT_RUNPATH), LD_LIBRARY_PATH, its DT_RUNPATH, the ld.so.cache that ldconfig
# builds from /etc/ld.so.conf (and its includes), then the system directories. The cache is
# read here as ldconfig writes it, from the configuration's directories in their order.
# Not modelled: a library already loaded under the same SONAME is reused (torch preloads some
# of its wheels' libraries), the RPATH of the objects that loaded the requester, hwcaps
# subdirectories, and secure-execution mode.
import glob
import os

MAX_CONF_FILES = 256
MAX_CONF_BYTES = 1 << 20
MAX_INCLUDE_DEPTH = 16
MULTIARCH = {"x86_64": "x86_64-linux-gnu", "aarch64": "aarch64-linux-gnu", "ppc64le": "powerpc64le-linux-gnu"}


class LdConf:
    """The directories of /etc/ld.so.conf in ldconfig's order, with the file naming each,
    and what could not be read (an include loop, an unreadable or oversized file)."""

    def __init__(self, path="/etc/ld.so.conf"):
        self.dirs = []  # [(directory, the configuration file that names it)]
        self.errors = []
        self.files = 0
        self.parse(path, [])

    def parse(self, path, stack):
        if path in stack:
            self.errors.append("include loop: " + " -> ".join(stack[stack.index(path):] + [path]))
            return
        if len(stack) >= MAX_INCLUDE_DEPTH or self.files >= MAX_CONF_FILES:
            self.errors.append("{}: not read (more than {} files or {} levels of include)".format(
                path, MAX_CONF_FILES, MAX_INCLUDE_DEPTH))
            return
        self.files += 1
        try:
            with open(path, "rb") as handle:
                data = handle.read(MAX_CONF_BYTES + 1)
        except OSError as exc:
            if stack or exc.errno != 2:  # a missing /etc/ld.so.conf is no error; ldconfig warns only on others
                self.errors.append("{}: {}".format(path, exc.strerror or exc))
            return
        if len(data) > MAX_CONF_BYTES:
            self.errors.append("{}: larger than {} KiB, not read".format(path, MAX_CONF_BYTES >> 10))
            return
        for line in data.decode("utf-8", "replace").splitlines():
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            if line.startswith("include") and line[7:8] in (" ", "\t"):
                for pattern in line[8:].split():
                    if not pattern.startswith("/") and "/" in path:  # relative to the including file
                        pattern = os.path.join(os.path.dirname(path), pattern)
                    for name in sorted(glob.glob(pattern)):
                        self.parse(name, stack + [path])
            elif line.lower().startswith("hwcap") and line[5:6] in (" ", "\t"):
                continue
            else:
                directory = line.split("=", 1)[0].rstrip("/") or "/"  # "dir=TYPE" is libc5-era syntax
                if directory not in [d for d, _ in self.dirs]:
                    self.dirs.append((directory, path))


def system_dirs():
    """The trusted directories ld.so searches last (Debian's multiarch ones first)."""
    triplet = MULTIARCH.get(os.uname()[4])
    dirs = ["/lib/" + triplet, "/usr/lib/" + triplet] if triplet else []
    return dirs + ["/lib64", "/usr/lib64", "/lib", "/usr/lib"]


def expand(entry, origin):
    """A DT_RPATH/DT_RUNPATH entry with $ORIGIN (the requester's directory) expanded."""
    return entry.replace("${ORIGIN}", origin).replace("$ORIGIN", origin)


def search_order(requester, dynamic, ld_library_path, conf):
    """[(step, directory)] in ld.so's order for a DT_NEEDED name of ``requester``."""
    origin = os.path.dirname(requester)
    dynamic = dynamic or {}
    order = []
    if dynamic.get("rpath") and not dynamic.get("runpath"):
        order += [("RPATH", expand(d, origin)) for d in dynamic["rpath"].split(":") if d]
    order += [("LD_LIBRARY_PATH", d) for d in (ld_library_path or "").replace(";", ":").split(":") if d]
    if dynamic.get("runpath"):
        order += [("RUNPATH", expand(d, origin)) for d in dynamic["runpath"].split(":") if d]
    order += [("ld.so.cache", d) for d, _ in conf.dirs]
    order += [("system directory", d) for d in system_dirs()]
    return order


def resolve(name, requester, dynamic, ld_library_path, conf):
    """{"path", "via", "dir"} of the file ld.so would open for ``name`` needed by
    ``requester``; path None when no directory has it."""
    if "/" in name:
        return {"path": name if os.path.isfile(name) else None, "via": "path", "dir": os.path.dirname(name)}
    for via, directory in search_order(requester, dynamic, ld_library_path, conf):
        candidate = os.path.join(directory, name)
        if os.path.isfile(candidate):
            return {"path": os.path.realpath(candidate), "via": via, "dir": directory}
    return {"path": None, "via": None, "dir": None}
