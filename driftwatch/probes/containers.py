"""The ``containers`` probe: each watched server as it runs, in a container or not.

For every server the processes probe keys (same keys, from the one /proc walk they share):

* ``limits``: what it runs under, the server's own and not the login shell's (memlock,
  nofile, its cgroup's CPU quota, cpuset and memory limit, its ``/dev/shm`` with NCCL
  segments left by earlier runs, OMP/MKL thread settings, the CPUs it may use); and once per
  host the NUMA-balancing and transparent-hugepage settings;
* ``container`` (None for a host process): runtime, id, name, the pod, the image reference
  it was started from with the image id, digests and creation time, created/started, restart
  count, shm size and IPC mode. Found from the host (cgroup, the shim or conmon parent, the
  bundle and the runtime's state files: ``container_identity.py``), then completed by the
  runtime's CLI where it is installed (``runtime_cli.py``: optional, bounded);
* ``python`` and ``libraries`` for a containerised server: the stack inside its container,
  as the server sees it, read by ``scripts/containers_collect.py`` with the python and
  libraries probes' own collectors in a child chrooted into ``/proc/PID/root`` (the
  distributions of the server's own interpreter; the libraries it maps with build-ids and
  RECORD owners of the files it loaded, never the host's files of the same path).

A host with no containerised server runs nothing more than the walk; a failure inside one
container is that server's ``error``, the others complete.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from driftwatch.probes.base import Facts, ProbeContext, ProbeError, ProbeSkipped, collect_json, collector_script, load_script
from driftwatch.probes.container_identity import docker_host, identify, label
from driftwatch.probes.cuda import NCCL_DIRS
from driftwatch.probes.libraries import PRELUDES as LIBRARY_PRELUDES
from driftwatch.probes.libraries import (
    MAX_HASH_BYTES,
    MAX_LIBRARIES,
    SYSTEM_GLOBS,
    WHEEL_GLOBS,
    build_facts,
    cache_from,
    digests_from,
    integrity_cache_from,
)
from driftwatch.probes.processes import keyed_servers, server_walk
from driftwatch.probes.python import python_entry
from driftwatch.probes.runtime_cli import ask, cli_context
from driftwatch.probes.server_limits import parse_kernel, server_limits


def _inner_request(ctx: ProbeContext, servers: dict[str, tuple[dict[str, Any], dict[str, Any]]]) -> dict[str, Any]:
    previous = ctx.previous.get("servers") if isinstance(ctx.previous.get("servers"), dict) else {}
    entries = []
    for key, (raw, facts) in sorted(servers.items()):
        context = raw.get("context") or {}
        before = (previous.get(key) or {}).get("libraries") or {}
        inside = _inside_root(context.get("root"))
        entries.append({
            "key": key, "pid": raw.get("pid"), "ns_pid": facts["ns_pid"], "argv": raw.get("argv") or [],
            "cwd": inside(raw.get("cwd")), "exe": inside(raw.get("exe")), "env": context.get("env") or {},
            "mapped": {inside(path): address for path, address in (raw.get("mapped") or {}).items()},
            # The last snapshot of this container is the cache: unchanged files are not read.
            "libraries": {"cache": cache_from(before), "digests": digests_from(before),
                          "integrity_cache": integrity_cache_from(before)},
        })
    return {
        "servers": entries,
        "modules": {"python": collector_script("python_collect.py"),
                    # The libraries probe's own script with the preludes it builds on, as it runs them.
                    "libraries": "\n\n".join(load_script(name) for name in (*LIBRARY_PRELUDES, "libraries_collect.py"))},
        "libraries": {"wheel_globs": WHEEL_GLOBS, "system_dirs": list(NCCL_DIRS), "system_globs": SYSTEM_GLOBS,
                      "focus": ctx.watch.focus, "max_files": MAX_LIBRARIES, "max_hash_bytes": MAX_HASH_BYTES,
                      "budget_s": max(1.0, ctx.timeout * 0.3)},
        "budget_s": max(1.0, ctx.time_left * 0.8),
    }


def _inside_root(root: Any) -> Any:
    """Host paths → the container's own: a root the host can reach (a chroot) prefixes every
    path the kernel shows the host; a container's own mount tree shows its paths as they are."""
    prefix = root.rstrip("/") if isinstance(root, str) and root not in ("", "/") else ""

    def inside(path: Any) -> Any:
        if prefix and isinstance(path, str) and (path == prefix or path.startswith(prefix + "/")):
            return path[len(prefix):] or "/"
        return path

    return inside


def inner_stacks(ctx: ProbeContext, servers: dict[str, tuple[dict[str, Any], dict[str, Any]]]) -> dict[str, Any]:
    """{key: {"python": entry, "libraries": facts}} for each containerised server, or an
    entry with the error that stopped it."""
    try:
        report = collect_json(ctx, "containers_collect.py", _inner_request(ctx, servers), what="containers",
                              keys=("servers",))
    except ProbeError as exc:  # includes ProbeTimeout: the containers' identities are still facts
        return {key: {"error": f"the stack inside the container was not read: {exc}"} for key in servers}
    out: dict[str, Any] = {}
    for key in servers:
        raw = report["servers"].get(key)
        out[key] = stack_facts(raw if isinstance(raw, dict) else {"error": "no report for this container"})
    return out


def stack_facts(raw: dict[str, Any]) -> dict[str, Any]:
    """One container's stack from the collector's report (pure)."""
    interpreter = raw.get("interpreter") if isinstance(raw.get("interpreter"), dict) else {}
    error = raw.get("error") or interpreter.get("error")
    if error:
        return {"python": {"error": str(error)}, "libraries": {"error": str(error)}}
    python = raw.get("python")
    libraries = raw.get("libraries")
    return {
        "python": python_entry(python) if isinstance(python, dict) else {"error": "no distributions reported"},
        "libraries": build_facts(libraries, None, {}) if isinstance(libraries, dict) else {"error": "no libraries reported"},
    }


def _cli_groups(found: dict[str, dict[str, Any]], daemons: list[list[str]]) -> dict[tuple[str, tuple[str, ...]], dict[str, Any]]:
    """Containers grouped by the CLI command that can describe them: {(tool, args): {id: identity}}."""
    groups: dict[tuple[str, tuple[str, ...]], dict[str, Any]] = {}
    for container in found.values():
        cli = container.get("cli")
        if not cli or not container.get("id"):
            continue
        args = list(cli.get("args") or [])
        if cli["tool"] == "docker":
            host = docker_host(daemons, container.get("data_root"))
            args = ["-H", host] if host else []
        groups.setdefault((cli["tool"], tuple(args)), {})[container["id"]] = container
    return groups


def ask_runtimes(ctx: ProbeContext, found: dict[str, dict[str, Any]], daemons: list[list[str]]) -> dict[str, Any]:
    """Each runtime CLI's answer, concurrently: {(tool, args): answer}."""
    groups = _cli_groups(found, daemons)
    if not groups:
        return {}
    bounded_ctx = cli_context(ctx)
    with ThreadPoolExecutor(max_workers=min(4, len(groups)), thread_name_prefix="containers-cli") as pool:
        futures = {group: pool.submit(ask, bounded_ctx, group[0], list(group[1]), ids) for group, ids in groups.items()}
        return {group: future.result() for group, future in futures.items()}


def container_facts(identity: dict[str, Any], answer: dict[str, Any] | None) -> dict[str, Any]:
    """One container's facts: the host's identity completed by its runtime CLI (pure)."""
    cli_says = (answer or {}).get("containers", {}).get(identity.get("id") or "") or {}
    images = (answer or {}).get("images") or {}
    labels = cli_says.get("labels") or {}
    pod = identity.get("pod") or (_pod_from_labels(labels) if labels else None)
    ref = identity.get("image_ref") or cli_says.get("image_ref")
    image_id = cli_says.get("image_id") or identity.get("image_id")
    image = images.get(image_id or "") or images.get(cli_says.get("image_query") or "") or {}
    digest = cli_says.get("image_digest") or (images.get(ref or "") or {}).get("digest")
    if identity.get("runtime") == "containerd" and digest and not image_id:
        image_id = digest  # containerd names an image by its manifest digest
    facts = {
        "runtime": identity.get("runtime"),
        "id": identity.get("id"),
        "name": cli_says.get("name") or identity.get("name"),
        "pod": pod,
        "image": {"ref": ref, "id": image_id, "digests": image.get("digests") or ([digest] if digest else []),
                  "tags": image.get("tags") or [], "created": image.get("created")},
        "created": cli_says.get("created") or identity.get("created"),
        "started": cli_says.get("started") or identity.get("started"),
        "restart_count": cli_says.get("restart_count", identity.get("restart_count")),
        "shm_size": cli_says.get("shm_size", identity.get("shm_size")),
        "ipc_mode": cli_says.get("ipc_mode") or identity.get("ipc_mode"),
        "evidence": identity.get("evidence") or [],
        "cli": None if answer is None else {"error": answer.get("error")},
    }
    if pod and pod.get("container"):
        facts["name"] = pod["container"]
    facts["label"] = label(facts)
    return facts


def _pod_from_labels(labels: dict[str, Any]) -> dict[str, Any] | None:
    if not labels.get("io.kubernetes.pod.name"):
        return None
    return {"name": labels.get("io.kubernetes.pod.name"), "namespace": labels.get("io.kubernetes.pod.namespace"),
            "uid": labels.get("io.kubernetes.pod.uid"), "container": labels.get("io.kubernetes.container.name")}


def build(report: dict[str, Any], stacks: dict[str, Any], answers: dict[Any, Any]) -> Facts:
    """The probe's facts from the walk's report, the stacks and the CLIs' answers (pure)."""
    keyed = keyed_servers(report)
    daemons = report.get("docker_daemons") or []
    servers: dict[str, Any] = {}
    for key, raw in keyed.items():
        context = raw.get("context")
        entry = server_limits(context, raw.get("start_time"))
        identity = identify(context)
        if identity is None:
            servers[key] = {"container": None, **entry}
            continue
        group = next((g for g, ids in _cli_groups({key: identity}, daemons).items() if ids), None)
        entry["container"] = container_facts(identity, answers.get(group) if group else None)
        entry.update(stacks.get(key) or {"python": {"error": "not read"}, "libraries": {"error": "not read"}})
        servers[key] = entry
    return {"servers": servers, "kernel": parse_kernel(report.get("kernel")),
            "volatile": {"cli_errors": sorted({a.get("error") for a in answers.values() if a.get("error")})}}


class ContainersProbe:
    name = "containers"

    def collect(self, ctx: ProbeContext) -> Facts:
        report = server_walk(ctx)
        if report.get("error"):
            raise ProbeSkipped(str(report["error"]))
        found: dict[str, dict[str, Any]] = {}
        inside: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
        for key, raw in keyed_servers(report).items():
            identity = identify(raw.get("context"))
            if identity is not None:
                found[key] = identity
                inside[key] = (raw, {"ns_pid": server_limits_ns_pid(raw)})
        if not found:
            return build(report, {}, {})
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="containers") as pool:
            answers = pool.submit(ask_runtimes, ctx, found, report.get("docker_daemons") or [])
            stacks = inner_stacks(ctx, inside)
            return build(report, stacks, answers.result())


def server_limits_ns_pid(raw: dict[str, Any]) -> int | None:
    """The server's pid inside its own pid namespace (the container's /proc names it so)."""
    ns_pid = str(((raw.get("context") or {}).get("status") or {}).get("NSpid") or "").split()
    return int(ns_pid[-1]) if ns_pid and ns_pid[-1].isdigit() else None
