"""Each server as it runs (the ``containers`` probe): its container and image, the stack
inside the image, and the limits it runs under.

The image moving under one reference (``lmsysorg/sglang:latest`` rebuilt and pulled) is ONE
headline change that names what moved inside it; the inner package and library changes are
still listed each with its own why (they come from the python and libraries rules, run on
the container's stack). A server moving into or out of a container, a restart, another
``--shm-size``, CPU quota, memlock or nofile limit, and the host's NUMA-balancing and
transparent-hugepage settings are changes in their own right. Servers are paired as the
processes diff pairs them (``diff/servers.py``).
"""

from __future__ import annotations

from typing import Any

from driftwatch.facts import fmt
from driftwatch.diff.change import Change, Severity
from driftwatch.diff.context import DiffContext
from driftwatch.facts.read import Facts, as_dict
from driftwatch.diff.libraries import diff_libraries
from driftwatch.diff.packages import diff_interpreter
from driftwatch.diff.server_limits import diff_kernel, diff_limits
from driftwatch.diff.servers import server_pairs

KEYS = frozenset({"servers", "kernel", "volatile"})
INSIDE_LISTED = 6  # inner version moves named in the image's headline
IMAGE_MAGNITUDE = 10.0  # the headline outranks the changes it carries within its severity


def diff_containers(old: Facts, new: Facts, ctx: DiffContext) -> list[Change]:
    before, after = as_dict(old.get("servers")), as_dict(new.get("servers"))
    changes: list[Change] = []
    moves: dict[tuple[Any, ...], list[str]] = {}  # one headline per image move, naming its servers
    carried: dict[tuple[Any, ...], list[str]] = {}
    subjects: dict[tuple[Any, ...], list[list[str]]] = {}  # the (category, item) of each change it carries
    processes = ctx.facts_of("processes")
    for old_key, key in server_pairs(before, after, processes):
        o, n = as_dict(before[old_key]), as_dict(after[key])
        changes += diff_limits(key, o, n, _env_watched(processes, old_key, key))
        oc, nc = o.get("container"), n.get("container")
        if not isinstance(oc, dict) and not isinstance(nc, dict):
            continue
        if not isinstance(oc, dict) or not isinstance(nc, dict):
            changes.append(_moved(key, as_dict(oc), as_dict(nc)))
            continue
        name = str(nc.get("label") or nc.get("name") or key)
        inner = _inner(name, o, n, ctx)
        image = _image_move(oc, nc)
        if image is not None:
            moves.setdefault(image, []).append(name)
            carried.setdefault(image, _inside(as_dict(o.get("python")), as_dict(n.get("python")), ctx))
            subjects.setdefault(image, []).extend([c.category, c.item] for c in inner if [c.category, c.item]
                                                  not in subjects.get(image, []))
        changes += _container(key, name, oc, nc)
        changes += inner
    for image, names in moves.items():
        changes.append(_headline(image, names, carried[image], subjects.get(image, [])))
    changes += diff_kernel(as_dict(old.get("kernel")), as_dict(new.get("kernel")))
    return changes


def _env_watched(processes: tuple[Facts, Facts], old_key: str, key: str) -> set[str]:
    """Variables the processes diff already compares for this server (its env globs)."""
    old_env = as_dict(as_dict(as_dict(processes[0].get("servers")).get(old_key)).get("env"))
    new_env = as_dict(as_dict(as_dict(processes[1].get("servers")).get(key)).get("env"))
    return set(old_env) | set(new_env)


def _short(image_id: Any) -> str:
    text = str(image_id or "?")
    head, sep, digest = text.partition(":")
    return f"{head}:{digest[:12]}…" if sep else f"{text[:12]}…"


def _day(stamp: Any) -> str | None:
    """``2026-02-25`` of an RFC 3339 time a runtime wrote."""
    return stamp[:10] if isinstance(stamp, str) and len(stamp) >= 10 else None


def _image_move(old: Facts, new: Facts) -> tuple[Any, ...] | None:
    """(ref, old id, new id, old created, new created) when the image id moved under one
    reference (the same name, another image)."""
    oi, ni = as_dict(old.get("image")), as_dict(new.get("image"))
    if oi.get("ref") and oi.get("ref") == ni.get("ref") and oi.get("id") and ni.get("id") and oi["id"] != ni["id"]:
        return (oi["ref"], oi["id"], ni["id"], oi.get("created"), ni.get("created"))
    return None


def _inside(old_py: Facts, new_py: Facts, ctx: DiffContext) -> list[str]:
    """The version moves inside an image, focus packages first: ``sgl-kernel 0.3.16 → 0.3.17``."""
    if old_py.get("error") or new_py.get("error"):
        return []
    od, nd = as_dict(old_py.get("distributions")), as_dict(new_py.get("distributions"))
    moved = []
    for name in sorted(od.keys() | nd.keys(), key=lambda n: (n not in ctx.focus, n)):
        o, n = as_dict(od.get(name)).get("version"), as_dict(nd.get(name)).get("version")
        if o != n:
            moved.append(f"{name} {o or '(none)'} → {n or '(removed)'}")
    return moved


def _headline(image: tuple[Any, ...], servers: list[str], inside: list[str], carries: list[list[str]]) -> Change:
    ref, old_id, new_id, old_created, new_created = image
    now = f"image {ref} is now {_short(new_id)}" + (f", created {_day(new_created)}" if _day(new_created) else "")
    was = f"was {_short(old_id)}" + (f", created {_day(old_created)}" if _day(old_created) else "")
    listed = ", ".join(inside[:INSIDE_LISTED]) + (f" and {len(inside) - INSIDE_LISTED} more" if len(inside) > INSIDE_LISTED else "")
    inner = f"; inside it: {listed}" if inside else "; no package inside it changed version (a rebuild: see the libraries)"
    who = f" (containers {fmt.listing(sorted(servers), 4)})" if len(servers) > 1 else f" (container {servers[0]})"
    # It carries the changes inside it: ranked above them, and accepted, they go with it.
    return Change("container", f"image {ref}", {"id": old_id, "created": old_created},
                  {"id": new_id, "created": new_created, "inside": inside, "servers": sorted(servers)},
                  Severity.high, f"{now}; {was}{inner}{who}: the same reference, another image",
                  magnitude=IMAGE_MAGNITUDE + len(inside), carries=tuple((str(c), str(i)) for c, i in carries))


def _moved(key: str, old: Facts, new: Facts) -> Change:
    if new:
        image = as_dict(new.get("image"))
        text = (f"server {key} now runs in a {new.get('runtime')} container {new.get('label') or new.get('name')}"
                f" (image {image.get('ref') or '?'}, {_short(image.get('id'))}): its packages and libraries are the"
                " image's, not the host's")
        return Change("container", key, None, new.get("label") or new.get("id"), Severity.high, text, magnitude=5.0)
    image = as_dict(old.get("image"))
    text = (f"server {key} no longer runs in a container (was {old.get('runtime')} {old.get('label') or old.get('name')},"
            f" image {image.get('ref') or '?'}): it runs from the host's own Python and libraries now")
    return Change("container", key, old.get("label") or old.get("id"), None, Severity.high, text, magnitude=5.0)


def _container(key: str, name: str, old: Facts, new: Facts) -> list[Change]:
    changes = []
    oi, ni = as_dict(old.get("image")), as_dict(new.get("image"))
    if oi.get("ref") != ni.get("ref") and oi.get("ref") and ni.get("ref"):
        changes.append(Change("container", f"{name} image", oi.get("ref"), ni.get("ref"), Severity.high,
                              f"container {name} now runs image {ni['ref']} ({_short(ni.get('id'))}); was {oi['ref']}"
                              f" ({_short(oi.get('id'))})", magnitude=IMAGE_MAGNITUDE))
    if old.get("id") != new.get("id") and old.get("id") and new.get("id"):
        changes.append(Change("container", f"{name} restarted", _short(old.get("id")), _short(new.get("id")), Severity.low,
                              f"container {name} was re-created ({_short(new.get('id'))}, was {_short(old.get('id'))})"
                              f"{_started(new)}"))
    elif old.get("started") != new.get("started") and old.get("started") and new.get("started"):
        changes.append(Change("container", f"{name} restarted", old.get("started"), new.get("started"), Severity.low,
                              f"container {name} was restarted{_started(new)}; was started {old['started'][:19]}"))
    if old.get("ipc_mode") != new.get("ipc_mode") and old.get("ipc_mode") and new.get("ipc_mode"):
        changes.append(Change("container", f"{name} ipc", old.get("ipc_mode"), new.get("ipc_mode"), Severity.medium,
                              f"container {name} IPC mode {old['ipc_mode']} → {new['ipc_mode']}: which /dev/shm and"
                              " shared memory its processes (and NCCL's shared-memory transport) share"))
    op, np_ = as_dict(old.get("pod")), as_dict(new.get("pod"))
    if op.get("name") != np_.get("name") and op.get("name") and np_.get("name"):
        changes.append(Change("container", f"{name} pod", op.get("name"), np_.get("name"), Severity.info,
                              f"{key} now runs in pod {np_.get('namespace')}/{np_['name']} (was {op['name']})"))
    return changes


def _started(container: Facts) -> str:
    started = container.get("started")
    return f" (started {started[:19]})" if isinstance(started, str) else ""


def _inner(name: str, old: Facts, new: Facts, ctx: DiffContext) -> list[Change]:
    """The stack inside the container, with the python and libraries rules themselves."""
    changes: list[Change] = []
    op, np_ = old.get("python"), new.get("python")
    if isinstance(op, dict) and isinstance(np_, dict):
        label = f"{name}:{np_.get('executable') or 'python'}"
        changes += diff_interpreter(label, op, np_, ctx, f" in container {name}")
    ol, nl = old.get("libraries"), new.get("libraries")
    if isinstance(ol, dict) and isinstance(nl, dict):
        if ol.get("error") or nl.get("error"):
            if ol.get("error") != nl.get("error") and nl.get("error"):
                changes.append(Change("container", f"{name} libraries", None, nl.get("error"), Severity.low,
                                      f"the libraries inside container {name} could not be read: {fmt.value(nl['error'])}"))
        else:
            changes += diff_libraries(ol, nl, ctx)
    return changes
