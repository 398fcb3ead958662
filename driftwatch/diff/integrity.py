"""Focus distributions against their RECORD (the ``libraries`` probe's ``integrity``).

Metadata says which version is installed; RECORD says which bytes that install wrote. A
file whose sha256 moved was modified or replaced after install; a file two distributions
claim with different content holds whichever was installed last (nvidia-nccl-cu12 and
nvidia-nccl-cu13 both write nvidia/nccl/lib/libnccl.so.2), so the metadata of the other
one lies about what loads.
"""

from __future__ import annotations


from driftwatch.facts import fmt
from driftwatch.diff.change import Change, Severity
from driftwatch.facts.names import file_category, short_path
from driftwatch.facts.read import Facts, as_dict


def diff_integrity(old: Facts, new: Facts) -> list[Change]:
    changes: list[Change] = []
    for interp in sorted(old.keys() & new.keys()):
        o, n = as_dict(old[interp]), as_dict(new[interp])
        if o.get("error") or n.get("error"):
            continue  # the interpreter failed: its libraries entry says so, nothing is compared
        where = f" ({interp})" if len(new) > 1 else ""
        changes += _shared(as_dict(o.get("shared")), as_dict(n.get("shared")), where)
        versions = as_dict(n.get("distributions"))
        changes += _per_distribution("modified", as_dict(o.get("modified")), as_dict(n.get("modified")), versions, where)
        changes += _per_distribution("missing", as_dict(o.get("missing")), as_dict(n.get("missing")), versions, where)
        changes += _per_distribution("unreadable", as_dict(o.get("unreadable")), as_dict(n.get("unreadable")),
                                     versions, where)
    return changes


def _shared(old: Facts, new: Facts, where: str) -> list[Change]:
    changes = []
    for path in sorted(old.keys() | new.keys()):
        o, n = as_dict(old.get(path)), as_dict(new.get(path))
        if (o.get("claimed_by"), o.get("on_disk")) == (n.get("claimed_by"), n.get("on_disk")):
            continue
        short = short_path(path)
        if not n:
            text = f"{short}{where} is no longer claimed by two distributions (was: {_claims(o)})"
            changes.append(Change(file_category(path), short, o.get("on_disk"), None, Severity.info, text))
            continue
        claims = as_dict(n.get("claimed_by"))
        holder = n.get("on_disk")
        losers = sorted(name for name in claims if name != holder)
        if holder:
            loaded = f"code that loads {fmt.listing(losers)}'s copy gets {holder} {claims.get(holder)}"
            text = f"{short}{where} is installed by {_claims(n)}; the copy on disk is {holder}'s: {loaded}"
        else:
            text = f"{short}{where} is installed by {_claims(n)}; the copy on disk matches none of them"
        native = not path.endswith(".py")
        changes.append(Change(file_category(path), short, o.get("on_disk"), holder,
                              Severity.high if native else Severity.medium, text, magnitude=3.0, focus=True))
    return changes


def _per_distribution(kind: str, old: Facts, new: Facts, versions: Facts, where: str) -> list[Change]:
    """One change per distribution whose files of this ``kind`` changed."""
    by_dist: dict[str, tuple[list[str], list[str]]] = {}
    for path in sorted(old.keys() | new.keys()):
        o, n = as_dict(old.get(path)), as_dict(new.get(path))
        if _same(kind, o, n):
            continue
        dist = str(n.get("distribution") or o.get("distribution"))
        came, gone = by_dist.setdefault(dist, ([], []))
        (came if n else gone).append(path)
    return [_dist_change(kind, dist, came, gone, new, versions, where) for dist, (came, gone) in by_dist.items()]


def _same(kind: str, old: Facts, new: Facts) -> bool:
    if kind == "modified":
        return (old.get("sha256"), old.get("expected_sha256")) == (new.get("sha256"), new.get("expected_sha256"))
    return bool(old) == bool(new) and old.get("error") == new.get("error")


def _dist_change(kind: str, dist: str, came: list[str], gone: list[str], new: Facts, versions: Facts,
                 where: str) -> Change:
    label = f"{dist} {versions.get(dist) or ''}".strip() + where
    native = any(not path.endswith(".py") for path in came)
    files = fmt.listing([short_path(p) for p in came])
    if not came:
        text = f"{label}: {fmt.listing([short_path(p) for p in gone])} {_AGAIN[kind]}"
        return Change("package", dist, gone, None, Severity.info, text, focus=True)
    if kind == "modified":
        first = as_dict(new.get(came[0]))
        evidence = f"sha256 {fmt.short(first.get('sha256'), 8)}…, RECORD says {fmt.short(first.get('expected_sha256'), 8)}…"
        text = (f"{label}: {fmt.plural(len(came), 'file')} {_verb(came, 'differs', 'differ')} from its RECORD "
                f"({files}; {evidence}): "
                "modified or replaced after install")
        severity = Severity.high if native else Severity.medium
    elif kind == "missing":
        text = f"{label}: {fmt.plural(len(came), 'file')} its RECORD lists {_verb(came, 'is', 'are')} missing ({files})"
        severity = Severity.high if native else Severity.medium
    else:
        error = as_dict(new.get(came[0])).get("error")
        text = f"{label}: {fmt.plural(len(came), 'file')} could not be checked ({files}): {fmt.value(error)}"
        severity = Severity.low
    category = file_category(came[0]) if native else "package"
    return Change(category, dist, None, came, severity, text, magnitude=2.5 if native else 1.0, focus=True)


_AGAIN = {"modified": "match RECORD again", "missing": "are back", "unreadable": "can be checked again"}


def _verb(paths: list[str], one: str, many: str) -> str:
    return one if len(paths) == 1 else many


def _claims(entry: Facts) -> str:
    claims = as_dict(entry.get("claimed_by"))
    return " and ".join(f"{name} {version}" for name, version in sorted(claims.items())) or "?"


