"""Collector run on the target as ``<python> -`` (script on stdin) by the python probe.

It must run on any python3 >= 3.8 with nothing but the stdlib, and must never import the
distributions it describes (an import can take minutes, touch the GPU or fail): everything
comes from ``importlib.metadata`` and plain file reads. It prints one line,
``MARKER + JSON``, last on stdout; the marker lets the reader skip anything a ``.pth``
file or sitecustomize printed first.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import sys
from importlib import metadata
from typing import Any, Dict, List, Optional
from urllib.parse import unquote, urlparse

MARKER = "driftwatch-python-report:"
_HEX_SHA = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")


def drop_cwd_from_path() -> None:
    """``python -`` puts the working directory first on sys.path; the login directory of
    an SSH session is arbitrary and must not change what the interpreter "has installed"."""
    if sys.path and sys.path[0] == "":
        del sys.path[0]


def normalize(name: str) -> str:
    """PEP 503 normalized project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _read_bytes(path: str) -> Optional[bytes]:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def _read_text(path: str) -> Optional[str]:
    data = _read_bytes(path)
    return None if data is None else data.decode("utf-8", "replace")


def _find_git_dir(start: str) -> Optional[str]:
    """The git directory of the work tree containing ``start``, walking up like git does
    (an editable install often points at a subdirectory, e.g. ``sglang/python``)."""
    current = os.path.abspath(start)
    while True:
        dotgit = os.path.join(current, ".git")
        if os.path.isdir(dotgit):
            return dotgit
        if os.path.isfile(dotgit):
            # Worktrees and submodules: ".git" is a file "gitdir: <path>".
            text = _read_text(dotgit) or ""
            if text.startswith("gitdir:"):
                return os.path.normpath(os.path.join(current, text[len("gitdir:") :].strip()))
            return None
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent


def _packed_ref(common_dir: str, ref: str) -> Optional[str]:
    for line in (_read_text(os.path.join(common_dir, "packed-refs")) or "").splitlines():
        if line.startswith(("#", "^")):
            continue
        parts = line.split(" ", 1)
        if len(parts) == 2 and parts[1].strip() == ref:
            return parts[0].strip()
    return None


def git_head(source: str) -> Optional[str]:
    """Commit checked out in the work tree containing ``source``, read from the files
    (spawning ``git`` for every editable package would be slow and may be missing)."""
    git_dir = _find_git_dir(source)
    if git_dir is None:
        return None
    # A linked worktree keeps HEAD in its own dir and branch refs in the common dir.
    common = _read_text(os.path.join(git_dir, "commondir"))
    common_dir = os.path.normpath(os.path.join(git_dir, common.strip())) if common else git_dir
    value = (_read_text(os.path.join(git_dir, "HEAD")) or "").strip()
    for _ in range(8):  # bounded: symbolic refs can point at symbolic refs
        if not value.startswith("ref:"):
            return value if _HEX_SHA.match(value) else None
        ref = value[len("ref:") :].strip()
        loose = _read_text(os.path.join(git_dir, ref)) or _read_text(os.path.join(common_dir, ref))
        if loose is not None and loose.strip():
            value = loose.strip()
            continue
        packed = _packed_ref(common_dir, ref)
        if packed is None:
            return None  # unborn branch, or a ref format we do not read (reftable)
        value = packed
    return None


def _direct_url(dist_dir: str) -> Dict[str, Any]:
    text = _read_text(os.path.join(dist_dir, "direct_url.json"))
    if not text:
        return {}
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _source_commit(direct: Dict[str, Any], editable: bool) -> Optional[str]:
    vcs = direct.get("vcs_info")
    if isinstance(vcs, dict) and isinstance(vcs.get("commit_id"), str):
        return str(vcs["commit_id"])  # installed from git: pip recorded the commit
    url = direct.get("url")
    if editable and isinstance(url, str) and url.startswith("file:"):
        return git_head(unquote(urlparse(url).path))
    return None


def describe(dist: Any) -> Optional[Dict[str, Any]]:
    """Facts of one distribution, or None when its metadata is unreadable."""
    dist_dir = str(getattr(dist, "_path", ""))  # PathDistribution; no public accessor
    try:
        meta = dist.metadata  # parsed once: .version/.requires would re-read METADATA
        # .get, not [...]: a missing header is deprecated as None and will raise on 3.12+
        name = meta.get("Name")
        version = meta.get("Version")
        requires: Optional[List[str]] = meta.get_all("Requires-Dist")
        if requires is None:
            requires = dist.requires  # egg-info keeps requirements in requires.txt
    except Exception:  # a corrupt METADATA must not lose the other distributions
        return None
    if not name:
        name = os.path.basename(dist_dir).split("-")[0]
    if not name:
        return None
    direct = _direct_url(dist_dir) if dist_dir else {}
    dir_info = direct.get("dir_info")
    editable = bool(isinstance(dir_info, dict) and dir_info.get("editable"))
    record = _read_bytes(os.path.join(dist_dir, "RECORD")) if dist_dir else None
    installer = _read_text(os.path.join(dist_dir, "INSTALLER")) if dist_dir else None
    try:
        installed_at: Optional[float] = os.stat(dist_dir).st_mtime if dist_dir else None
    except OSError:
        installed_at = None
    url = direct.get("url")
    return {
        "name": name,
        "version": version,
        "installed_at": installed_at,
        "installer": (installer or "").strip() or None,
        "editable": editable,
        "direct_url": url if isinstance(url, str) else None,
        "source_commit": _source_commit(direct, editable),
        "record_sha256": hashlib.sha256(record).hexdigest() if record is not None else None,
        "requires": list(requires or []),
        "location": os.path.dirname(dist_dir) if dist_dir else None,
    }


def collect() -> Dict[str, Any]:
    drop_cwd_from_path()
    distributions: Dict[str, Dict[str, Any]] = {}
    # distributions() walks sys.path in order; the first hit of a name is the one that
    # `import` and importlib.metadata.version() would use, later copies are shadowed.
    for dist in metadata.distributions():
        facts = describe(dist)
        if facts is not None:
            distributions.setdefault(normalize(facts["name"]), facts)
    return {
        "executable": sys.executable,
        "version": platform.python_version(),
        "prefix": sys.prefix,
        "distributions": distributions,
    }


def emit(report: Dict[str, Any]) -> None:
    text = json.dumps(report, ensure_ascii=False, sort_keys=True)
    # Undecodable file names arrive as lone surrogates: hand their raw bytes back and let
    # the reader's lenient decoding replace them, instead of crashing on stdout's codec.
    try:
        data = (MARKER + text + "\n").encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        data = (MARKER + json.dumps(report, sort_keys=True) + "\n").encode("ascii")
    sys.stdout.flush()
    sys.stdout.buffer.write(b"\n" + data)
    sys.stdout.buffer.flush()


if __name__ == "__main__":
    emit(collect())
