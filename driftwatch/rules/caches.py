"""Stale compile caches (the ``caches`` probe): JIT builds older than the install of the
package that owns them, in caches that key their entries by version only."""

from __future__ import annotations

from driftwatch.facts import fmt
from driftwatch.facts.read import Facts, as_dict, normalize_name
from driftwatch.rules.finding import Finding
from driftwatch.facts.names import package_subjects
from driftwatch.rules.host import Host, Missing
from driftwatch.severity import Severity

STALE_JIT = "https://github.com/flashinfer-ai/flashinfer/issues/4489"
# FlashInfer keys its JIT builds by version only, torch extensions by Python and CUDA only:
# after a same-version reinstall (or a torch upgrade) their old objects are used as they
# are. Triton, Inductor, vLLM and SGLang key entries by hashes that cover the compiler's
# build: old entries go unused, never stale (the caches probe's own judgement).
STALE_ON_REINSTALL = frozenset({"flashinfer", "torch_extensions"})


def stale_caches(host: Host) -> list[Finding]:
    caches = as_dict(host.facts("caches").get("caches"))
    installs = _installs(host)
    findings = []
    for key, cache in sorted(caches.items()):
        cache = as_dict(cache)
        if cache.get("layout") not in STALE_ON_REINSTALL or cache.get("error") or not cache.get("exists"):
            continue
        for name, entry in sorted(as_dict(cache.get("entries")).items()):
            finding = _stale(str(key), str(cache.get("path") or key), str(name), as_dict(entry), installs)
            findings += [finding] if finding else []
    return findings


def _stale(key: str, path: str, name: str, entry: Facts, installs: dict[str, list[Facts]]) -> Finding | None:
    owner = as_dict(entry.get("owner"))
    package = normalize_name(str(owner.get("package") or ""))
    if entry.get("files") is None or not package:
        return None
    for dist in installs.get(package, []):
        if owner.get("version") and dist.get("version") != owner["version"]:
            continue  # another version's entry: unused, not stale
        if owner.get("python") and not str(dist.get("_python") or "").startswith(f"{owner['python']}."):
            continue  # torch extensions of another interpreter
        installed = fmt.number(dist.get("installed_at"))
        older, total = _older(entry, installed) if installed is not None else (0, 0)
        if not older:
            continue
        where = f"{path.rstrip('/')}/{name}"
        share = f"{older} of {total} compiled objects" if total else "files"
        return Finding(
            severity=Severity.medium,
            why=f"{where}: {share} predate the install of {package} {dist.get('version')} "
                f"({fmt.when(installed)}): the cache is keyed by version only, so after a reinstall or rebuild of "
                "the same version those objects are linked into new kernels as they are",
            fix=f"rm -rf {where} (it is rebuilt on next use)",
            reference=STALE_JIT,
            subjects=(("file", f"{key.rstrip('/')}/{name}"), *package_subjects(package)),
            key=f"{key}/{name}",
            restates=(("file", f"{key.rstrip('/')}/{name}"),),  # the caches diff's line for the entry
        )
    return None


def _older(entry: Facts, installed: float) -> tuple[int, int]:
    """(objects older than the install, objects listed); without a list, the oldest file."""
    objects = entry.get("objects")
    if isinstance(objects, dict):
        older = sum(1 for v in objects.values() if isinstance(v, list) and len(v) > 1
                    and isinstance(v[1], (int, float)) and v[1] < installed)
        return older, int(entry.get("object_count") or len(objects))
    oldest = fmt.number(entry.get("oldest"))
    return (1 if oldest is not None and oldest < installed else 0), 0


def _installs(host: Host) -> dict[str, list[Facts]]:
    """Distribution name → its installs, each with its interpreter's Python version."""
    try:
        interpreters = host.interpreters()
    except Missing as exc:
        raise Missing(f"the owners' install times are unknown: {exc}") from exc
    found: dict[str, list[Facts]] = {}
    for interp in interpreters.values():
        for name, dist in as_dict(interp.get("distributions")).items():
            if isinstance(dist, dict):
                found.setdefault(name, []).append({**dist, "_python": interp.get("version")})
    return found
