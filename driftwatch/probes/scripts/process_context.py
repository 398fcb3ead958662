# driftwatch target-side prelude (any python3 >= 3.6, stdlib only), sent ahead of
# processes_collect.py: what the host's kernel and the container runtimes' state files say
# about one server process, read from the host, never from inside the container.
#
# process_context(pid, request, host) returns raw text and small dicts (the probe side
# parses them, see driftwatch/probes/containers.py and container_identity.py):
#   cgroup        /proc/PID/cgroup as the host sees it (v1, v2 or hybrid)
#   cgroup_limits the CPU, cpuset and memory limit files of that cgroup and its parents
#   mnt_ns        the mount namespace, and whether it is the host's
#   limits        /proc/PID/limits;  status: Threads, Cpus_allowed_list, NSpid, THP_enabled
#   shm           statvfs of the process's own /dev/shm and its NCCL segments
#   env           the variables the request names (OMP_NUM_THREADS, PATH, PYTHONPATH…) from
#                 its environment, whatever [watch] env says; only the thread ones are kept
#   container     only for a process in another mount namespace or a container cgroup
#                 (container_context.py, compiled only then): its ancestors up to the
#                 runtime's shim or conmon (argv, cwd), the marker files, the OCI bundle's
#                 config.json and the runtime's own state file
#                 (docker's config.v2.json, podman's containers.json entry), subsets only.
# Every read is bounded and may fail (the process exited, permission denied): a failed read
# is recorded as an error string, never as an absent limit.
import os
import re
import stat as _stat

TYPE_CHECKING = False
if TYPE_CHECKING:  # for type checkers only: processes_collect.py follows this prelude in one script
    from driftwatch.probes.scripts.processes_collect import (  # noqa: TC004
        parse_environ, read_bounded, readlink)

HEX64 = re.compile(r"[0-9a-f]{64}")
CGROUP_FILES = {"cpu": ("cpu.cfs_quota_us", "cpu.cfs_period_us"), "cpuset": ("cpuset.effective_cpus",),
                "memory": ("memory.limit_in_bytes",)}  # cgroup v1, by controller
V2_FILES = ("cpu.max", "cpuset.cpus.effective", "memory.max")
STATUS_KEYS = ("Threads", "Cpus_allowed_list", "Mems_allowed_list", "NSpid", "THP_enabled")


def _text(path, limit=65536):
    data = read_bounded(path, limit)
    return None if data is None else data.decode("utf-8", "replace")


def _error(exc):
    return getattr(exc, "strerror", None) or str(exc)


def cgroup_mounts():
    """[(fstype, super options, mount root, mount point)] of the host's cgroup mounts."""
    mounts = []
    for line in (_text("/proc/self/mountinfo", 1 << 20) or "").splitlines():
        left, sep, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if sep and len(fields) >= 5 and len(tail) >= 3 and tail[0] in ("cgroup", "cgroup2"):
            mounts.append((tail[0], set(tail[2].split(",")), fields[3], fields[4].replace("\\040", " ")))
    return mounts


def _cgroup_dirs(cgroup_text, mounts):
    """{"v1:<controllers>" or "v2": host directory of the process's cgroup}."""
    dirs = {}
    for line in (cgroup_text or "").splitlines():
        number, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        for fstype, options, root, point in mounts:
            wanted = fstype == "cgroup2" if controllers == "" else (
                fstype == "cgroup" and set(controllers.split(",")) <= options)
            if wanted and (path + "/").startswith(root.rstrip("/") + "/"):
                dirs["v2" if controllers == "" else "v1:" + controllers] = point + path[len(root.rstrip("/")):]
                break
    return dirs


def cgroup_limits(cgroup_text, mounts):
    """The limit files of the process's cgroups and of each parent up to the mount point
    (a limit set on a parent, as Kubernetes' QoS slices do, binds the child too); each
    hierarchy's own files only, the cpuset at the leaf only."""
    levels = []
    for version, leaf in sorted(_cgroup_dirs(cgroup_text, mounts).items()):
        names = [name for controller, files in CGROUP_FILES.items() if controller in version.split(":")[-1].split(",")
                 for name in files] if version != "v2" else V2_FILES
        if not names:
            continue
        point = next((m[3] for m in mounts if leaf.startswith(m[3])), "/")
        current = leaf
        for depth in range(16):
            files = {}
            for name in names:
                if depth and name.startswith("cpuset"):
                    continue
                value = _text(os.path.join(current, name), 4096)
                if value is not None:
                    files[name] = value.strip()
            if files:
                levels.append({"hierarchy": version, "path": current[len(point):] or "/", "files": files})
            if current.rstrip("/") == point.rstrip("/"):
                break
            current = os.path.dirname(current.rstrip("/"))
    return levels


def in_root(root, path, hops=8):
    """``path`` inside ``root`` with every symlink resolved against ``root`` (an absolute
    link in a container points into the container, never back into the host); None when
    the links loop."""
    parts = [p for p in path.split("/") if p and p != "."]
    done = root
    while parts:
        part = parts.pop(0)
        if part == "..":
            done = done if done == root else os.path.dirname(done)
            continue
        candidate = os.path.join(done, part)
        try:
            is_link = _stat.S_ISLNK(os.lstat(candidate).st_mode)
        except OSError:
            return os.path.join(candidate, *parts) if parts else candidate
        if not is_link:
            done = candidate
            continue
        hops -= 1
        if hops < 0:
            return None
        target = os.readlink(candidate)
        if target.startswith("/"):
            done = root
        parts = [p for p in target.split("/") if p and p != "."] + parts
    return done


def shm_usage(pid, max_segments):
    """Size and use of the /dev/shm the process sees, and its NCCL segments (mtime, size)."""
    root = "/proc/%d/root" % pid
    path = in_root(root, "/dev/shm")
    if path is None:
        return {"error": "/dev/shm: too many symbolic links"}
    segments, entries = [], 0
    try:
        vfs = os.statvfs(path)
        with os.scandir(path) as listing:  # a busy /dev/shm can hold many entries: bounded
            for entry in listing:
                entries += 1
                if entries > 64 * max_segments:
                    break
                if entry.name.startswith("nccl-") and len(segments) < max_segments:
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    segments.append([round(st.st_mtime, 1), st.st_size])
    except OSError as exc:
        return {"error": "/dev/shm: " + _error(exc)}
    return {"size": vfs.f_blocks * vfs.f_frsize, "free": vfs.f_bavail * vfs.f_frsize,
            "entries": entries, "nccl_segments": segments, "error": None}


def _same_root(pid):
    """Whether the process's root directory is the host's (False in a container, whose
    root is its image; True under ``unshare -m`` alone); None when unreadable."""
    try:
        mine, theirs = os.stat("/"), os.stat("/proc/%d/root" % pid)
    except OSError:
        return None
    return (mine.st_dev, mine.st_ino) == (theirs.st_dev, theirs.st_ino)


def context_env(pid, names):
    environ = read_bounded("/proc/%d/environ" % pid, 4 * 1024 * 1024)
    if environ is None:
        return None
    env = parse_environ(environ)
    return dict((name, env[name][:256]) for name in names if name in env)


def process_context(pid, request, host):
    """The context of one server (see the top of this file). ``host`` holds what the walk
    reads once: the cgroup mounts and the walker's own mount namespace."""
    cgroup = _text("/proc/%d/cgroup" % pid)
    ns = readlink("/proc/%d/ns/mnt" % pid)
    status = {}
    for line in (_text("/proc/%d/status" % pid) or "").splitlines():
        key, _, value = line.partition(":")
        if key in STATUS_KEYS:
            status[key] = value.strip()
    out = {
        "cgroup": cgroup,
        "cgroup_limits": cgroup_limits(cgroup, host["cgroup_mounts"]),
        "mnt_ns": ns,
        "host_mnt_ns": None if ns is None or host["mnt_ns"] is None else ns == host["mnt_ns"],
        "root_is_host": _same_root(pid),
        # Its root as the host names it: "/" for a container's own mount tree, the image's
        # folder for a chroot the host can reach (its maps name files under that folder).
        "root": readlink("/proc/%d/root" % pid),
        "limits": _text("/proc/%d/limits" % pid),
        "status": status,
        "shm": shm_usage(pid, request.get("max_shm_segments", 256)),
        "env": context_env(pid, request.get("context_env") or []),
        "container": None,
    }
    # A server in its own mount namespace, or in a cgroup named like a container's: find
    # out who runs it. A host process never pays for this.
    if out["host_mnt_ns"] is False or HEX64.search(cgroup or ""):
        out["container"] = discovery(request, host)["container_context"](pid, cgroup)
    return out


def host_context():
    """Read once per walk: the cgroup mounts, the host's mount namespace (init's, else the
    walker's own), the NUMA-balancing and transparent-hugepage settings."""
    ns = readlink("/proc/1/ns/mnt") or readlink("/proc/self/ns/mnt")
    kernel = {}
    for key, path in (("numa_balancing", "/proc/sys/kernel/numa_balancing"),
                      ("thp_enabled", "/sys/kernel/mm/transparent_hugepage/enabled"),
                      ("thp_defrag", "/sys/kernel/mm/transparent_hugepage/defrag")):
        value = _text(path, 4096)
        kernel[key] = value.strip() if value is not None else None
    try:  # RDMA devices (InfiniBand, RoCE): the class exists once ib_core is loaded
        kernel["rdma_devices"] = sorted(os.listdir("/sys/class/infiniband"))[:64]
    except OSError as exc:
        kernel["rdma_devices"] = [] if exc.errno == 2 else None
    return {"cgroup_mounts": cgroup_mounts(), "mnt_ns": ns, "kernel": kernel}


def discovery(request, host):
    """container_context.py's functions, compiled the first time a server looks like it runs
    in a container (the request carries their source): a host without one never pays for them."""
    if "discovery" not in host:
        namespace = dict(globals())
        exec(compile(request.get("container_code") or "", "<container_context>", "exec"), namespace)
        host["discovery"] = namespace
    return host["discovery"]


def host_report(host, processes):
    """What the walk's report says about the host beside its servers: the kernel settings,
    and the docker daemons when a server runs under one (containerd namespace "moby")."""
    report = {"kernel": host["kernel"]}
    if "discovery" in host:
        daemons = host["discovery"]["docker_daemons_for"](processes)
        if daemons is not None:
            report["docker_daemons"] = daemons
    return report
