"""Which server of the old snapshot is which server of the new one.

Servers are keyed by what they are (``processes.server_keys``), but a key can still move: a
second server appears and the first becomes ``entry:30000``, a Kubernetes rollout renames
the pod. Servers left unpaired by their keys are paired by what they serve — their entry
point, container, model and port — and only where exactly one server on each side matches:
two servers on one host are never compared crosswise, and none by its position in a list.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from driftwatch.facts.read import as_dict

Identity = Callable[[dict[str, Any]], tuple[Any, ...] | None]


def _port(server: dict[str, Any]) -> Any:
    port = as_dict(server.get("args")).get("port")
    return port[-1] if isinstance(port, list) and port else port


def _container(server: dict[str, Any]) -> str | None:
    """The container's name without the pod's (a rollout renames the pod, not its container)."""
    label = server.get("container")
    if not isinstance(label, str):
        return None
    parts = label.split("/")
    return f"{parts[0]}/{parts[-1]}" if len(parts) == 3 else label


def _full(server: dict[str, Any]) -> tuple[Any, ...] | None:
    return (server.get("entry"), _container(server), server.get("model"), _port(server))


def _served(server: dict[str, Any]) -> tuple[Any, ...] | None:
    """What it serves, wherever it runs: a server moved into or out of a container."""
    if not server.get("model") and _port(server) is None:
        return None  # nothing but the entry point: too weak to pair on
    return (server.get("entry"), server.get("model"), _port(server))


def match_servers(before: dict[str, Any], after: dict[str, Any]) -> list[tuple[str, str]]:
    """(old key, new key) for every server on both sides, the same key first."""
    pairs = [(key, key) for key in sorted(before.keys() & after.keys())]
    old_rest, new_rest = sorted(before.keys() - after.keys()), sorted(after.keys() - before.keys())
    for identity in (_full, _served):
        old_ids = {key: identity(as_dict(before[key])) for key in old_rest}
        new_ids = {key: identity(as_dict(after[key])) for key in new_rest}
        for old_key, mine in old_ids.items():
            if mine is None or list(old_ids.values()).count(mine) != 1:
                continue
            found = [key for key, theirs in new_ids.items() if theirs == mine]
            if len(found) == 1:
                pairs.append((old_key, found[0]))
                new_rest.remove(found[0])
                del new_ids[found[0]]
        old_rest = [key for key in old_rest if key not in {o for o, _ in pairs}]
    return sorted(pairs)


def server_pairs(old_servers: Any, new_servers: Any, processes: tuple[dict[str, Any], dict[str, Any]]) -> list[tuple[str, str]]:
    """Pairs of keys of another probe's per-server facts (same keys as the processes probe's),
    matched with the processes facts where both sides have them, else by key alone."""
    before, after = as_dict(old_servers), as_dict(new_servers)
    old_proc, new_proc = (as_dict(as_dict(facts).get("servers")) for facts in processes)
    if old_proc and new_proc:
        return [(o, n) for o, n in match_servers(old_proc, new_proc) if o in before and n in after]
    return [(key, key) for key in sorted(before.keys() & after.keys())]
