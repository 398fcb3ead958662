"""What a container runtime's CLI knows, asked once per runtime and snapshot (optional, bounded).

``docker inspect`` / ``podman inspect`` (the container: the image reference it was started
from, the image id, created/started, shm size, IPC mode, restart count) and their ``image
inspect`` (repo tags, repo digests, created); for a Kubernetes container, ``crictl inspect``
where it is installed (the image as the pod spec names it, the digest it resolved to, the
pod's labels, the kubelet's restart count) and ``crictl inspecti``, else containerd's ``ctr
containers info`` (the image reference, the Kubernetes labels) and ``ctr images ls`` (the
manifest digest a reference points at). A CLI that is missing or fails is a fact with its
reason; one that hangs is cut at its own deadline, shorter than the probe's, so the rest of
the probe completes. Parsers are pure and tested with captured real output (crictl's with
output in its documented shape: Debian packages no crictl).
"""

from __future__ import annotations

import json
import shlex
from typing import Any

from driftwatch.facts.read import as_dict
from driftwatch.probes.base import ProbeContext, ProbeError, ProbeTimeout
from driftwatch.probes.container_identity import bounded, flag

MAX_CLI_S = 5.0  # a runtime's CLI never takes more than this share of the probe's time
NOT_FOUND = 127


def _json_list(text: str) -> list[Any]:
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ProbeError(f"unreadable inspect output: {exc}") from exc
    if not isinstance(data, list):
        raise ProbeError("unreadable inspect output: not a list")
    return [d for d in data if isinstance(d, dict)]


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def parse_inspect(text: str) -> dict[str, dict[str, Any]]:
    """``docker inspect`` / ``podman inspect`` of containers → {id: facts}."""
    out: dict[str, dict[str, Any]] = {}
    for entry in _json_list(text):
        config = as_dict(entry.get("Config"))
        state = as_dict(entry.get("State"))
        host = as_dict(entry.get("HostConfig"))
        cid = bounded(entry.get("Id"))
        if cid is None:
            continue
        out[cid] = {
            "name": bounded(str(entry.get("Name") or "").lstrip("/")),
            # podman keeps the reference as typed in ImageName; docker in Config.Image.
            "image_ref": bounded(entry.get("ImageName")) or bounded(config.get("Image")),
            "image_id": bounded(entry.get("Image")),
            "image_digest": bounded(entry.get("ImageDigest")),
            "created": bounded(entry.get("Created")),
            "started": bounded(state.get("StartedAt")),
            "restart_count": _int(entry.get("RestartCount")),
            "shm_size": _int(host.get("ShmSize")),
            "ipc_mode": bounded(host.get("IpcMode")),
        }
    return out


def parse_image_inspect(text: str) -> dict[str, dict[str, Any]]:
    """``docker image inspect`` / ``podman image inspect`` → {image id: facts}."""
    out: dict[str, dict[str, Any]] = {}
    for entry in _json_list(text):
        image_id = bounded(entry.get("Id"))
        if image_id is None:
            continue
        tags = entry.get("RepoTags") if isinstance(entry.get("RepoTags"), list) else []
        digests = entry.get("RepoDigests") if isinstance(entry.get("RepoDigests"), list) else []
        facts = {
            "tags": sorted({t for t in map(bounded, tags[:32]) if t}),
            "digests": sorted({d for d in map(bounded, digests[:32]) if d}),
            "created": bounded(entry.get("Created")),
        }
        out[image_id] = facts
        if not image_id.startswith("sha256:"):  # podman's ids are bare hex; docker's say sha256:
            out["sha256:" + image_id] = facts
    return out


def parse_ctr_info(text: str) -> dict[str, Any]:
    """``ctr containers info ID`` → the image reference, labels and creation time."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ProbeError(f"unreadable ctr output: {exc}") from exc
    if not isinstance(data, dict):
        raise ProbeError("unreadable ctr output: not an object")
    labels = as_dict(data.get("Labels"))
    return {
        "image_ref": bounded(data.get("Image")),
        "created": bounded(data.get("CreatedAt")),
        "labels": {str(k)[:256]: bounded(v) for k, v in list(labels.items())[:64]},
    }


def parse_ctr_images(text: str) -> dict[str, str]:
    """``ctr images ls`` (a table: REF TYPE DIGEST SIZE PLATFORMS LABELS) → {ref: digest}."""
    out: dict[str, str] = {}
    for line in text.splitlines()[1:]:
        words = line.split()
        if len(words) >= 3 and words[2].startswith("sha256:"):
            out[words[0][:256]] = words[2][:80]
    return out


def _json_values(text: str, what: str) -> list[dict[str, Any]]:
    """The JSON objects of one output: one object (one id), a list (crictl 1.26 and later, for
    several ids) or objects one after another (earlier crictl)."""
    decoder, values, at = json.JSONDecoder(), [], 0
    while True:
        while at < len(text) and text[at].isspace():
            at += 1
        if at >= len(text):
            return [v for v in values if isinstance(v, dict)]
        try:
            value, at = decoder.raw_decode(text, at)
        except ValueError as exc:
            raise ProbeError(f"unreadable {what} output: {exc}") from exc
        values += value if isinstance(value, list) else [value]


def _k8s_restarts(annotations: dict[str, Any], metadata: dict[str, Any]) -> int | None:
    """The kubelet's restart count (its annotation), else the CRI attempt number."""
    text = annotations.get("io.kubernetes.container.restartCount")
    if isinstance(text, str) and text.isdigit():
        return int(text)
    return _int(metadata.get("attempt"))


def parse_crictl_inspect(text: str) -> dict[str, dict[str, Any]]:
    """``crictl inspect --quiet -o json ID…`` → {id: facts}: the image as the pod spec names it
    (``userSpecifiedImage``, CRI 1.30+) or as the runtime shows it, the image id, the digest it
    resolved to (``imageRef`` as ``repo@sha256:…``), created/started and the restart count."""
    out: dict[str, dict[str, Any]] = {}
    for entry in _json_values(text, "crictl inspect"):
        status = as_dict(entry.get("status"))
        cid = bounded(status.get("id"))
        if cid is None:
            continue
        metadata = as_dict(status.get("metadata"))
        image = as_dict(status.get("image"))
        labels = as_dict(status.get("labels"))
        annotations = as_dict(status.get("annotations"))
        resolved = bounded(status.get("imageRef")) or ""
        digest = resolved.rpartition("@")[2] if "@sha256:" in resolved else None
        out[cid] = {
            "name": bounded(metadata.get("name")),
            "image_ref": bounded(image.get("userSpecifiedImage")) or bounded(image.get("image")),
            "image_id": bounded(status.get("imageId")) or (resolved if resolved.startswith("sha256:") else None),
            "image_digest": digest,
            "image_query": resolved or None,  # what crictl inspecti is asked about
            "created": bounded(status.get("createdAt")),
            "started": bounded(status.get("startedAt")),
            "restart_count": _k8s_restarts(annotations, metadata),
            "labels": {str(k)[:256]: bounded(v) for k, v in list(labels.items())[:64]},
        }
    return out


def parse_crictl_inspecti(text: str) -> dict[str, dict[str, Any]]:
    """``crictl inspecti -o json IMAGE…`` → {image id, and each repo digest ref: facts}."""
    out: dict[str, dict[str, Any]] = {}
    for entry in _json_values(text, "crictl inspecti"):
        status = as_dict(entry.get("status"))
        info = as_dict(entry.get("info"))
        spec = as_dict(info.get("imageSpec"))
        image_id = bounded(status.get("id"))
        if image_id is None:
            continue
        tags = status.get("repoTags") if isinstance(status.get("repoTags"), list) else []
        digests = status.get("repoDigests") if isinstance(status.get("repoDigests"), list) else []
        facts = {"tags": sorted({t for t in map(bounded, tags[:32]) if t}),
                 "digests": sorted({d for d in map(bounded, digests[:32]) if d}),
                 "created": bounded(spec.get("created"))}
        for key in (image_id, *facts["digests"]):
            out[key] = facts
    return out


def _run(ctx: ProbeContext, tool: str, argv: list[str]) -> str:
    """One CLI command within the CLI's own deadline; its stdout, or ProbeError (a missing
    tool says so) / ProbeTimeout."""
    words = " ".join(shlex.quote(w) for w in [tool, *argv])
    script = f"command -v {shlex.quote(tool)} >/dev/null 2>&1 || exit {NOT_FOUND}; exec {words}"
    result = ctx.run(script)
    if result.exit_code == NOT_FOUND:
        raise ProbeError(f"the {tool} CLI is not installed: what the host's files show is recorded")
    if result.exit_code != 0:
        last = result.error_text.strip().splitlines()[-1:]
        raise ProbeError(f"{tool} {argv[-2] if len(argv) > 1 else ''} failed: {last[0][:200] if last else f'exit {result.exit_code}'}")
    return result.text


def cli_context(ctx: ProbeContext) -> ProbeContext:
    """The probe's context with a shorter deadline for a runtime's CLI."""
    return ProbeContext(transport=ctx.transport, watch=ctx.watch, timeout=min(MAX_CLI_S, ctx.timeout * 0.5),
                        previous=ctx.previous, shared=ctx.shared)


def ask(ctx: ProbeContext, tool: str, args: list[str], containers: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """What ``tool`` says about ``containers`` ({id: identity}): {"containers": {id: facts},
    "images": {image id or ref: facts}, "error": why not (missing, failed, timed out)}. For a
    Kubernetes container under containerd, crictl answers where it is installed and works."""
    out: dict[str, Any] = {"containers": {}, "images": {}, "error": None}
    asking = tool
    try:
        if tool == "ctr" and flag(args, "-n") == "k8s.io":
            asking = "crictl"
            try:
                return _ask_crictl(ctx, _crictl_args(args), containers)
            except ProbeTimeout:
                raise
            except ProbeError:
                asking = "ctr"  # not installed, or no CRI on that socket: ctr still reads it
        if tool == "crictl":
            return _ask_crictl(ctx, args, containers)
        if tool == "ctr":
            for cid in sorted(containers):
                out["containers"][cid] = parse_ctr_info(_run(ctx, tool, [*args, "containers", "info", cid]))
            digests = parse_ctr_images(_run(ctx, tool, [*args, "images", "ls"]))
            out["images"] = {ref: {"digest": digest} for ref, digest in digests.items()}
            return out
        out["containers"] = parse_inspect(_run(ctx, tool, [*args, "inspect", "--type", "container", *sorted(containers)]))
        images = sorted({str(c.get("image_id")) for c in [*out["containers"].values(), *containers.values()]
                         if c.get("image_id")})
        if images:
            out["images"] = parse_image_inspect(_run(ctx, tool, [*args, "image", "inspect", *images]))
    except ProbeTimeout as exc:
        out["error"] = f"{asking} timed out ({exc}): a hung runtime daemon? what the host's files show is recorded"
        out["timeout"] = True
    except ProbeError as exc:
        out["error"] = str(exc)
    return out


def _crictl_args(ctr_args: list[str]) -> list[str]:
    """crictl's endpoint from ctr's: containerd serves the CRI on the socket the shim names."""
    address = flag(ctr_args, "--address", "-a")
    return ["--runtime-endpoint", f"unix://{address}"] if address else []


def _ask_crictl(ctx: ProbeContext, args: list[str], containers: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """``crictl inspect`` of the containers, then ``inspecti`` of their images: an image that
    cannot be described keeps the containers' answer, with the reason."""
    out: dict[str, Any] = {"containers": {}, "images": {}, "error": None}
    out["containers"] = parse_crictl_inspect(
        _run(ctx, "crictl", [*args, "inspect", "--quiet", "--output", "json", *sorted(containers)]))
    queries = sorted({str(c["image_query"]) for c in out["containers"].values() if c.get("image_query")})
    if queries:
        try:
            out["images"] = parse_crictl_inspecti(_run(ctx, "crictl", [*args, "inspecti", "--output", "json", *queries]))
        except ProbeError as exc:  # a timeout too: the containers' answer is kept
            out["error"] = str(exc)
    return out
