# Runs ON THE TARGET under any python3 >= 3.6, stdlib only. Reads a JSON request on
# stdin, prints one JSON document: the kernel modules the GPU stack depends on, as sysfs
# shows them, whether the running kernel has a module file for each (modules.dep), what
# DKMS built for which kernel, the peer-memory clients GPUDirect RDMA registers, and the
# RDMA devices (see driftwatch/probes/modules.py).
#
# /sys/module/NAME/initstate exists for every loaded loadable module, which is what
# lsmod's /proc/modules lists too (a container or a VM without module support may have
# neither). Every read is bounded; an entry that cannot be read is recorded with its
# reason, never as "not loaded" or "absent".
import errno
import json
import os
import sys

MAX_READ = 4096
MAX_DEP = 16 << 20  # modules.dep of a distribution kernel is ~1 MB
MAX_ENTRIES = 512  # directory entries looked at per listing
SYS_MODULE = "/sys/module"
DKMS = "/var/lib/dkms"
MEMORY_PEERS = "/sys/kernel/mm/memory_peers"  # where NCCL looks for nv_peer_mem's clients
INFINIBAND = "/sys/class/infiniband"


def reason(exc):
    return exc.strerror or str(exc)


def read_value(path):
    """(text stripped, None) of a small sysfs file; (None, None) when it does not exist;
    (None, reason) when it exists but cannot be read."""
    try:
        with open(path, "rb") as handle:
            return handle.read(MAX_READ).decode("utf-8", "replace").strip(), None
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return None, None
        return None, reason(exc)


def listing(path):
    """(sorted names, None), (None, None) when the directory does not exist, or (None, reason)."""
    try:
        names = sorted(os.listdir(path))
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return None, None
        return None, reason(exc)
    return names[:MAX_ENTRIES], None


def module(root, name):
    """One module as /sys/module shows it."""
    base = os.path.join(root, name)
    if not os.path.isdir(base):
        return {"present": False}
    entry = {"present": True}
    for field in ("initstate", "version", "srcversion", "refcnt"):
        value, error = read_value(os.path.join(base, field))
        entry[field] = value
        if error:
            entry[field + "_error"] = error
    holders, error = listing(os.path.join(base, "holders"))
    entry["holders"] = holders or []
    if error:
        entry["holders_error"] = error
    return entry


def modules(request, root=SYS_MODULE):
    names, error = listing(root)
    if names is None:
        return {}, error or "no {} on this host".format(root)
    wanted = list(request.get("modules") or [])
    prefixes = tuple(request.get("prefixes") or [])
    wanted += [n for n in names if prefixes and n.startswith(prefixes) and n not in wanted]
    return dict((name, module(root, name)) for name in wanted), None


def module_name(path):
    """``nvidia_peermem`` from ``updates/dkms/nvidia-peermem.ko.zst`` (modprobe treats - and _ alike)."""
    base = path.rsplit("/", 1)[-1]
    stem = base.split(".ko", 1)[0]
    return stem.replace("-", "_")


def module_files(release, wanted, root="/lib/modules"):
    """{module: its file in modules.dep} for the wanted modules the running kernel has,
    or the reason modules.dep could not be read."""
    path = "{}/{}/modules.dep".format(root, release)
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_DEP + 1)
    except OSError as exc:
        return None, "{}: {}".format(path, reason(exc))
    if len(data) > MAX_DEP:
        return None, "{}: larger than {} MiB".format(path, MAX_DEP >> 20)
    found = {}
    want = set(wanted)
    for line in data.decode("utf-8", "replace").splitlines():
        target = line.split(":", 1)[0].strip()
        name = module_name(target) if target else ""
        if name in want and name not in found:
            found[name] = target
    return found, None


def dkms(root):
    """{module: {version: [kernel/arch built]}} from DKMS's tree; None when there is none."""
    names, error = listing(root)
    if names is None:
        return None, error
    out = {}
    for name in names:
        versions, _ = listing(os.path.join(root, name))
        for version in versions or []:
            path = os.path.join(root, name, version)
            if not os.path.isdir(path) or os.path.islink(path):
                continue  # kernel-<release>-<arch> links point at installed builds
            kernels, _ = listing(path)
            built = []
            for kernel in kernels or []:
                if kernel in ("source", "build", "log"):
                    continue
                arches, _ = listing(os.path.join(path, kernel))
                built += ["{}/{}".format(kernel, arch) for arch in arches or []]
            out.setdefault(name, {})[version] = built
    return out, None


def peer_memory(root):
    """{client: version} of the peer-memory clients registered with ib_core (MLNX_OFED);
    the directory's absence is {}."""
    names, error = listing(root)
    if names is None:
        return {}, error
    out = {}
    for name in names:
        value, err = read_value(os.path.join(root, name, "version"))
        out[name] = {"version": value, "error": err}
    return out, None


def rdma(root):
    """{device: {...}} of /sys/class/infiniband: what each device is and its ports' state."""
    names, error = listing(root)
    if names is None:
        return {}, error
    devices = {}
    for name in names:
        base = os.path.join(root, name)
        device = {"errors": {}}
        for field in ("node_type", "fw_ver", "hca_type", "board_id"):
            value, err = read_value(os.path.join(base, field))
            device[field] = value
            if err:
                device["errors"][field] = err
        ports, err = listing(os.path.join(base, "ports"))
        if err:
            device["errors"]["ports"] = err
        device["ports"] = {}
        for port in ports or []:
            facts = {}
            for field in ("state", "phys_state", "link_layer", "rate"):
                value, perr = read_value(os.path.join(base, "ports", port, field))
                facts[field] = value
                if perr:
                    device["errors"]["port {} {}".format(port, field)] = perr
            device["ports"][port] = facts
        devices[name] = device
    return devices, None


def main():
    request = json.load(sys.stdin)
    release = os.uname()[2]
    found, modules_error = modules(request)
    files, files_error = module_files(release, list(found) + list(request.get("modules") or []))
    builds, dkms_error = dkms(DKMS)
    peers, peers_error = peer_memory(MEMORY_PEERS)
    devices, rdma_error = rdma(INFINIBAND)
    json.dump({
        "kernel": release,
        "modules": found, "modules_error": modules_error,
        "files": files, "files_error": files_error,
        "dkms": builds, "dkms_error": dkms_error,
        "memory_peers": peers, "memory_peers_error": peers_error,
        "rdma": devices, "rdma_error": rdma_error,
    }, sys.stdout)


if __name__ == "__main__":
    main()
