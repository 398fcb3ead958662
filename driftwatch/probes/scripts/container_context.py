# driftwatch target-side code (any python3 >= 3.6, stdlib only), compiled by
# process_context.py inside the /proc walk the first time a server looks like it runs in a
# container, with the walk's own functions in scope (read_bounded, readlink, stat_fields...).
#
# container_context(pid, cgroup_text): who runs the process, as the host knows it -- its
# ancestors up to the runtime's shim (containerd-shim-runc-v2, whose working directory is
# the task's bundle) or conmon (-b BUNDLE -c ID -n NAME), the marker files, the parts of the
# bundle's config.json that identify the container, and the runtime's own state file
# (docker's config.v2.json and hostconfig.json beside the hostname file it bind-mounts;
# podman's containers.json). Every file read is bounded; a failure is an "error" string.
import json
import os
import re

TYPE_CHECKING = False
if TYPE_CHECKING:  # for type checkers only: the walk's namespace is this code's globals
    from driftwatch.probes.scripts.process_context import _text  # noqa: TC004
    from driftwatch.probes.scripts.processes_collect import read_bounded, readlink, split_nul, stat_fields  # noqa: TC004

CONTEXT_MAX = 1 << 20  # bytes of one state or config file kept in memory
SHIMS = ("containerd-shim", "conmon", "docker-containerd-shim", "crun", "runc")
HEX64 = re.compile(r"[0-9a-f]{64}")
BUNDLE_MOUNTS = ("/etc/hostname", "/dev/shm", "/run/.containerenv")
DOCKER_STATE = ("Name", "Image", "Created", "RestartCount")


def _argv(pid):
    raw = read_bounded("/proc/%d/cmdline" % pid, 65536)
    return [word[:4096] for word in split_nul(raw)[:512]] if raw else []


def _json_file(path):
    data = read_bounded(path, CONTEXT_MAX + 1)
    if data is None:
        return None, "unreadable"
    if len(data) > CONTEXT_MAX:
        return None, "larger than %d bytes" % CONTEXT_MAX
    try:
        return json.loads(data.decode("utf-8", "replace")), None
    except ValueError:
        return None, "not JSON"


def _bundle(path):
    """The parts of an OCI bundle's config.json that identify the container."""
    config, error = _json_file(os.path.join(path, "config.json"))
    if not isinstance(config, dict):
        return {"path": path, "error": error or "not an object"}
    mounts = [m for m in config.get("mounts") or [] if isinstance(m, dict) and m.get("destination") in BUNDLE_MOUNTS]
    linux = config.get("linux") if isinstance(config.get("linux"), dict) else {}
    annotations = config.get("annotations") if isinstance(config.get("annotations"), dict) else {}
    return {"path": path, "hostname": config.get("hostname"), "annotations": dict(list(annotations.items())[:64]),
            "mounts": [{"destination": m.get("destination"), "source": m.get("source")} for m in mounts],
            "cgroups_path": linux.get("cgroupsPath"), "error": None}


def _docker_state(bundle):
    """docker's own record of the container (config.v2.json beside the hostname file it
    bind-mounts), for the name and the image reference it was started from."""
    source = next((m.get("source") for m in bundle.get("mounts") or [] if m.get("destination") == "/etc/hostname"), None)
    if not isinstance(source, str) or "/containers/" not in source:
        return None
    state, error = _json_file(os.path.join(os.path.dirname(source), "config.v2.json"))
    if not isinstance(state, dict):
        return {"error": error or "not an object"}
    config = state.get("Config") if isinstance(state.get("Config"), dict) else {}
    run = state.get("State") if isinstance(state.get("State"), dict) else {}
    host = _json_file(os.path.join(os.path.dirname(source), "hostconfig.json"))[0]
    host = host if isinstance(host, dict) else {}
    out = dict((k, state.get(k)) for k in DOCKER_STATE)
    out.update(image_ref=config.get("Image"), started=run.get("StartedAt"), shm_size=host.get("ShmSize"),
               ipc_mode=host.get("IpcMode"), data_root=os.path.dirname(os.path.dirname(os.path.dirname(source))),
               error=None)
    return out


def _podman_state(bundle_path, container_id):
    """podman's (containers/storage's) record of the container: containers.json beside it."""
    top = os.path.dirname(os.path.dirname(bundle_path.rstrip("/")))
    entries, error = _json_file(os.path.join(top, "containers.json"))
    if not isinstance(entries, list):
        return {"error": error or "not a list"}
    for entry in entries:
        if isinstance(entry, dict) and entry.get("id") == container_id:
            return {"names": entry.get("names"), "image": entry.get("image"), "metadata": entry.get("metadata"),
                    "created": entry.get("created"), "error": None}
    return {"error": "not listed"}


def _flag(argv, *names):
    for index, word in enumerate(argv[:-1]):
        if word in names:
            return argv[index + 1]
    return None


def container_context(pid, cgroup_text):
    """Who runs the process, as the host knows it: the ancestors up to the shim, markers,
    the bundle and the runtime's state file."""
    chain = []
    current = pid
    for _ in range(16):
        fields = stat_fields(current)
        if not fields or int(fields[1]) <= 1:
            break
        current = int(fields[1])
        argv = _argv(current)
        chain.append({"pid": current, "argv": argv, "cwd": readlink("/proc/%d/cwd" % current)})
        if argv and os.path.basename(argv[0]).startswith(SHIMS):
            break
    root = "/proc/%d/root" % pid
    markers = dict((name, os.path.lexists(root + "/" + name)) for name in (".dockerenv", "run/.containerenv"))
    out = {"ancestors": chain, "markers": markers, "bundle": None, "state": None}
    shim = chain[-1] if chain and chain[-1]["argv"] and os.path.basename(chain[-1]["argv"][0]).startswith(SHIMS) else None
    if shim is None:
        return out
    argv = shim["argv"]
    if os.path.basename(argv[0]) == "conmon":
        bundle_dir = _flag(argv, "-b", "--bundle")
    else:
        # containerd's shim runs in its task's bundle; a pod's shim in its sandbox's, with the
        # pod's other containers' bundles beside it (named by the id in their cgroup path).
        bundle_dir = shim["cwd"]
        for found in HEX64.findall(cgroup_text or ""):
            sibling = os.path.join(os.path.dirname(bundle_dir or "/"), found)
            if bundle_dir and os.path.isfile(os.path.join(sibling, "config.json")):
                bundle_dir = sibling
    if not bundle_dir:
        return out
    bundle = out["bundle"] = _bundle(bundle_dir)
    if os.path.basename(argv[0]) == "conmon":
        out["state"] = _podman_state(bundle_dir, _flag(argv, "-c", "--cid"))
    else:
        out["state"] = _docker_state(bundle)
    return out


def docker_daemons(limit=8):
    """The argv of every running dockerd (its --host and --data-root say which socket owns
    which container), read only when a docker container was found."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit() and len(found) < limit and (_text("/proc/%s/comm" % name, 64) or "").strip() == "dockerd":
            found.append(_argv(int(name)))
    return found


def docker_daemons_for(processes):
    """The dockerds' argv when a server runs under one (containerd namespace "moby"), else None."""
    for entry in processes:
        container = (entry.get("context") or {}).get("container") or {}
        shim = (container.get("ancestors") or [{}])[-1].get("argv") or []
        if _flag(shim, "-namespace") == "moby":
            return docker_daemons()
    return None
