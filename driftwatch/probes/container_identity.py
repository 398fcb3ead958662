"""Which container a server process runs in, from what the host shows (pure parsers).

The walk of /proc (``scripts/process_context.py``) hands over raw text: the process's
cgroup lines, its ancestors up to the runtime's shim (``containerd-shim-runc-v2 -namespace
moby -id …``) or ``conmon`` (``-c ID -n NAME -b BUNDLE``), the OCI bundle's config.json
subset and the runtime's own state file. Nothing here trusts the container: the marker files
``/.dockerenv`` and ``/run/.containerenv`` are only a last hint, and every string from a
runtime is bounded here and escaped by whoever prints it.

Used by the processes probe (servers are keyed by container name where their entry point
alone is ambiguous) and by the containers probe (the facts).
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

MAX_TEXT = 256  # characters kept of any name, reference or label from a runtime

# cgroup path components, v1 and v2, cgroupfs and systemd drivers.
_CGROUP_IDS = (
    ("docker", re.compile(r"(?:^|/)docker[-/]([0-9a-f]{64})(?:\.scope)?(?:/|$)")),
    ("podman", re.compile(r"(?:^|/)libpod-([0-9a-f]{64})(?:\.scope)?(?:/|$)")),
    ("cri-o", re.compile(r"(?:^|/)crio-([0-9a-f]{64})(?:\.scope)?(?:/|$)")),
    ("containerd", re.compile(r"(?:^|/)cri-containerd-([0-9a-f]{64})(?:\.scope)?(?:/|$)")),
    (None, re.compile(r"(?:^|/)kubepods[^\n]*/([0-9a-f]{64})(?:/|$)")),
)
_POD_UID = re.compile(r"pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})")
# Annotations the CRI plugins write into the OCI config (containerd's, then CRI-O's / kubelet's).
_CRI = {
    "container": ("io.kubernetes.cri.container-name", "io.kubernetes.container.name"),
    "pod": ("io.kubernetes.cri.sandbox-name", "io.kubernetes.pod.name"),
    "namespace": ("io.kubernetes.cri.sandbox-namespace", "io.kubernetes.pod.namespace"),
    "uid": ("io.kubernetes.cri.sandbox-uid", "io.kubernetes.pod.uid"),
    "image": ("io.kubernetes.cri.image-name", "io.kubernetes.cri-o.ImageName"),
}


def bounded(value: Any) -> str | None:
    """A runtime's string as data: text, at most MAX_TEXT characters; None for anything else."""
    if not isinstance(value, str) or not value:
        return None
    return value if len(value) <= MAX_TEXT else value[: MAX_TEXT - 1] + "…"


def parse_cgroup(text: str | None) -> dict[str, Any]:
    """{"runtime", "id", "pod_uid"} from /proc/PID/cgroup (None where it says nothing)."""
    found: dict[str, Any] = {"runtime": None, "id": None, "pod_uid": None}
    for line in (text or "").splitlines():
        path = line.split(":", 2)[-1]
        for runtime, pattern in _CGROUP_IDS:
            match = pattern.search(path)
            if match and found["id"] is None:
                found.update(runtime=runtime, id=match.group(1))
        uid = _POD_UID.search(path)
        if uid and found["pod_uid"] is None:
            found["pod_uid"] = uid.group(1).replace("_", "-")
    return found


def flag(argv: list[str], *names: str) -> str | None:
    """The value after the first of ``names`` in ``argv`` (``-n NAME``), or of ``NAME=value``."""
    for index, word in enumerate(argv):
        if word in names and index + 1 < len(argv):
            return argv[index + 1]
        head, eq, value = word.partition("=")
        if eq and head in names:
            return value
    return None


def _exit_command_args(argv: list[str]) -> list[str]:
    return [argv[i + 1] for i, word in enumerate(argv[:-1]) if word == "--exit-command-arg"]


def _shim(context: dict[str, Any]) -> list[str]:
    ancestors = (context.get("container") or {}).get("ancestors") or []
    argv = (ancestors[-1] if ancestors else {}).get("argv") or []
    name = os.path.basename(argv[0]) if argv else ""
    return [str(w) for w in argv] if name.startswith(("containerd-shim", "conmon", "docker-containerd-shim")) else []


def pod_of(annotations: dict[str, Any], pod_uid: str | None) -> dict[str, Any] | None:
    """The Kubernetes pod a container belongs to, from its CRI annotations."""
    values = {key: next((bounded(annotations.get(name)) for name in names if annotations.get(name)), None)
              for key, names in _CRI.items()}
    if not values["pod"] and not values["container"]:
        return None
    return {"name": values["pod"], "namespace": values["namespace"], "uid": values["uid"] or pod_uid,
            "container": values["container"]}


def identify(context: dict[str, Any] | None) -> dict[str, Any] | None:
    """The container of one server, or None for a process of the host itself.

    Evidence in order of trust: the shim or conmon parent and the bundle its runtime wrote,
    the cgroup path, the runtime's own state file, and only last the marker files a
    container could fake. A process in its own mount namespace over the host's root (``unshare
    -m``) is not a container."""
    if not isinstance(context, dict) or not isinstance(context.get("container"), dict):
        return None
    raw = context["container"]
    cgroup = parse_cgroup(context.get("cgroup"))
    shim = _shim(context)
    bundle = raw.get("bundle") if isinstance(raw.get("bundle"), dict) else {}
    state = raw.get("state") if isinstance(raw.get("state"), dict) else {}
    annotations = bundle.get("annotations") if isinstance(bundle.get("annotations"), dict) else {}
    found: dict[str, Any] = {
        "runtime": None, "id": cgroup["id"], "name": None, "namespace": None, "pod": None,
        "image_ref": None, "image_id": None, "created": None, "started": None, "restart_count": None,
        "shm_size": None, "ipc_mode": None, "cli": None, "evidence": [],
    }
    if shim and os.path.basename(shim[0]) == "conmon":
        exit_args = _exit_command_args(shim)
        podman = any(os.path.basename(w) == "podman" for w in [flag(shim, "--exit-command") or "", *exit_args])
        found.update(runtime="podman" if podman else "cri-o", id=flag(shim, "-c", "--cid") or found["id"],
                     name=bounded(flag(shim, "-n", "--name")))
        found["evidence"].append("conmon")
        # CRI-O has no CLI of its own: crictl, where installed, finds its socket (crictl.yaml).
        found["cli"] = {"tool": "podman", "args": _podman_args(exit_args)} if podman else {"tool": "crictl", "args": []}
    elif shim:
        namespace = flag(shim, "-namespace")
        found.update(runtime="docker" if namespace == "moby" else "containerd", namespace=bounded(namespace),
                     id=found["id"] or flag(shim, "-id"))
        found["evidence"].append("containerd-shim")
        address = flag(shim, "-address")
        found["cli"] = {"tool": "docker" if namespace == "moby" else "ctr",
                        "args": [] if namespace == "moby" else [*(["--address", address] if address else []),
                                                               "-n", namespace or "default"]}
    elif cgroup["runtime"] or cgroup["id"]:
        found["runtime"] = cgroup["runtime"] or "containerd"
        found["evidence"].append("cgroup")
    if cgroup["id"]:
        found["evidence"].append("cgroup")
    found["pod"] = pod_of(annotations, cgroup["pod_uid"])
    _from_state(found, state)
    found["image_ref"] = found["image_ref"] or bounded(annotations.get("io.kubernetes.cri.image-name"))
    markers = raw.get("markers") if isinstance(raw.get("markers"), dict) else {}
    if found["runtime"] is None:
        if context.get("root_is_host") is not False and not markers.get(".dockerenv") and not markers.get("run/.containerenv"):
            return None  # its own mount namespace over the host's root: not a container
        found["runtime"] = "docker" if markers.get(".dockerenv") else "podman" if markers.get("run/.containerenv") else "unknown"
        hinted = markers.get(".dockerenv") or markers.get("run/.containerenv")
        found["evidence"].append("marker files" if hinted else "mount namespace")
    if found["pod"] and found["pod"].get("container"):
        found["name"] = found["pod"]["container"]
    if not found["name"] and found["id"]:
        found["name"] = found["id"][:12]
    found["id"] = bounded(found["id"])
    found["evidence"] = sorted(set(found["evidence"]))
    return found


def _podman_args(exit_args: list[str]) -> list[str]:
    """The storage flags podman was run with, from the exit command it gave conmon, so that
    ``podman inspect`` reads the same store."""
    out: list[str] = []
    for name in ("--root", "--runroot", "--storage-driver", "--cgroup-manager", "--tmpdir"):
        value = flag(exit_args, name)
        if value:
            out += [name, value]
    return out


def _from_state(found: dict[str, Any], state: dict[str, Any]) -> None:
    """Fill in what the runtime's state file says (docker's config.v2.json subset, or
    podman's containers.json entry)."""
    if state.get("error"):
        return
    if "image_ref" in state:  # docker
        found.update(name=bounded(str(state.get("Name") or "").lstrip("/")) or found["name"],
                     image_ref=bounded(state.get("image_ref")), image_id=bounded(state.get("Image")),
                     created=bounded(state.get("Created")), started=bounded(state.get("started")),
                     restart_count=state.get("RestartCount") if isinstance(state.get("RestartCount"), int) else None,
                     shm_size=state.get("shm_size") if isinstance(state.get("shm_size"), int) else None,
                     ipc_mode=bounded(state.get("ipc_mode")))
        found["data_root"] = bounded(state.get("data_root"))
        found["evidence"].append("config.v2.json")
        return
    if "names" in state:  # podman
        names = state.get("names") if isinstance(state.get("names"), list) else []
        try:
            metadata = json.loads(state.get("metadata") or "{}")
        except (TypeError, ValueError):
            metadata = {}
        metadata = metadata if isinstance(metadata, dict) else {}
        found.update(name=found["name"] or bounded(names[0] if names else None),
                     image_ref=bounded(metadata.get("image-name")), image_id=bounded(state.get("image")),
                     created=bounded(state.get("created")))
        found["evidence"].append("containers.json")


def label(container: dict[str, Any] | None) -> str | None:
    """How a server's container is named in a key and a sentence: the container's name, and
    for a pod's container ``namespace/pod/container``."""
    if not container:
        return None
    pod = container.get("pod") or {}
    if pod.get("name"):
        return "/".join(str(p) for p in (pod.get("namespace"), pod.get("name"), pod.get("container")) if p)
    return container.get("name") or container.get("id")


def docker_host(daemons: list[list[str]], data_root: str | None) -> str | None:
    """The socket of the dockerd whose --data-root holds the container (the default root
    when a daemon names none), as a ``-H`` value; None for the docker CLI's own default."""
    for argv in daemons or []:
        root = flag(argv, "--data-root", "-g") or "/var/lib/docker"
        if data_root and os.path.normpath(root) == os.path.normpath(data_root):
            return flag(argv, "-H", "--host")
    return None
