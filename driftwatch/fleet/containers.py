"""Fleet facts of the servers as they run: the image behind each reference, the limits.

Hosts that should be alike run the same image under one reference: a host whose
``lmsysorg/sglang:latest`` is another image id (pulled at another time) is the odd one out,
whatever its containers are named. Container ids, names, pods and start times are identity
and never compared; each server's /dev/shm size, CPU quota and memlock limit are.
"""

from __future__ import annotations

from typing import Any

from driftwatch.diff.change import Severity
from driftwatch.facts.read import as_dict
from driftwatch.fleet.facts import Area, Fact, FactMap, HostView, freeze
from driftwatch.fleet.runtime import SERVERS


def containers_facts(facts: dict[str, Any], view: HostView) -> tuple[FactMap, frozenset[str]]:
    out: FactMap = {}
    images: dict[str, set[str]] = {}
    for key, entry in as_dict(facts.get("servers")).items():
        server = as_dict(entry)
        image = as_dict(as_dict(server.get("container")).get("image"))
        if image.get("ref"):
            images.setdefault(str(image["ref"]), set()).add(str(image.get("id") or "unknown"))
        shm = as_dict(server.get("shm"))
        limits = as_dict(server.get("limits"))
        for field, label, value, severity in (
            ("shm", "/dev/shm size", shm.get("error") and "unreadable" or shm.get("size"), Severity.high),
            ("cpu_limit", "CPU quota", as_dict(server.get("cgroup")).get("cpu_limit"), Severity.medium),
            ("memlock", "memlock limit", as_dict(limits.get("memlock")).get("soft"), Severity.medium),
        ):
            out[f"containers[{key}].{field}"] = Fact("containers", "process", f"{key} {field}", f"{label} ({key})",
                                                     freeze(value), severity, within=SERVERS)
    for ref, ids in sorted(images.items()):
        out[f"containers.image[{ref}]"] = Fact("containers", "container", f"image {ref}", f"image {ref} (image id)",
                                               tuple(sorted(ids)), Severity.high,
                                               why=" (the same reference, another image: pulled at another time?)")
    kernel = as_dict(facts.get("kernel"))
    for field, label in (("numa_balancing", "kernel.numa_balancing"), ("thp_enabled", "transparent hugepages")):
        if field in kernel:
            out[f"containers.kernel.{field}"] = Fact("containers", "system", label, label, freeze(kernel[field]),
                                                     Severity.medium)
    return out, frozenset({"servers", "kernel", "volatile"})


CONTAINER_AREAS: dict[str, Area] = {"containers": containers_facts}
