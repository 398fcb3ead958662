"""Collector run on the target as ``<python> -`` (script on stdin), after the prelude
``dists.py`` (normalize, read_text, distribution_paths, emit ...). One run per configured
interpreter and snapshot serves two probes: ``python`` (every distribution) and ``cuda``
(the NCCL/cuDNN wheels, and the raw text of ``torch/version.py``).

It must run on any python3 >= 3.8 with nothing but the stdlib, and must never import the
distributions it describes (an import can take minutes, touch the GPU or fail): everything
comes from the ``*.dist-info`` / ``*.egg-info`` files and plain file reads. It prints one
line, ``MARKER + JSON``, last on stdout.
"""

import hashlib
from importlib import util
from urllib.parse import unquote, urlparse

TYPE_CHECKING = False
if TYPE_CHECKING:  # for type checkers only: importing typing costs ~5 ms per start on the target
    from typing import Any

    from driftwatch.probes.scripts.dists import *  # noqa: F403  (the prelude, sent first)

_HEX_SHA = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")


def _find_git_dir(start: str) -> str | None:
    """The git directory of the work tree containing ``start``, walking up like git does
    (an editable install often points at a subdirectory, e.g. ``sglang/python``)."""
    current = os.path.abspath(start)
    while True:
        dotgit = os.path.join(current, ".git")
        if os.path.isdir(dotgit):
            return dotgit
        if os.path.isfile(dotgit):
            # Worktrees and submodules: ".git" is a file "gitdir: <path>".
            text = read_text(dotgit) or ""
            if text.startswith("gitdir:"):
                return os.path.normpath(os.path.join(current, text[len("gitdir:") :].strip()))
            return None
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent


def _packed_ref(common_dir: str, ref: str) -> str | None:
    for line in (read_text(os.path.join(common_dir, "packed-refs")) or "").splitlines():
        if line.startswith(("#", "^")):
            continue
        parts = line.split(" ", 1)
        if len(parts) == 2 and parts[1].strip() == ref:
            return parts[0].strip()
    return None


def git_head(source: str) -> str | None:
    """Commit checked out in the work tree containing ``source``, read from the files
    (spawning ``git`` for every editable package would be slow and may be missing)."""
    git_dir = _find_git_dir(source)
    if git_dir is None:
        return None
    # A linked worktree keeps HEAD in its own dir and branch refs in the common dir.
    common = read_text(os.path.join(git_dir, "commondir"))
    common_dir = os.path.normpath(os.path.join(git_dir, common.strip())) if common else git_dir
    value = (read_text(os.path.join(git_dir, "HEAD")) or "").strip()
    for _ in range(8):  # bounded: symbolic refs can point at symbolic refs
        if not value.startswith("ref:"):
            return value if _HEX_SHA.match(value) else None
        ref = value[len("ref:") :].strip()
        loose = read_text(os.path.join(git_dir, ref)) or read_text(os.path.join(common_dir, ref))
        if loose is not None and loose.strip():
            value = loose.strip()
            continue
        packed = _packed_ref(common_dir, ref)
        if packed is None:
            return None  # unborn branch, or a ref format we do not read (reftable)
        value = packed
    return None


def _direct_url(dist_dir: str) -> dict[str, Any]:
    text = read_text(os.path.join(dist_dir, "direct_url.json"))
    if not text:
        return {}
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _source_commit(direct: dict[str, Any], editable: bool) -> str | None:
    vcs = direct.get("vcs_info")
    if isinstance(vcs, dict) and isinstance(vcs.get("commit_id"), str):
        return str(vcs["commit_id"])  # installed from git: pip recorded the commit
    url = direct.get("url")
    if editable and isinstance(url, str) and url.startswith("file:"):
        return git_head(unquote(urlparse(url).path))
    return None


def describe(dist_dir: str) -> dict[str, Any] | None:
    """Facts of one distribution, or None when its metadata is unreadable."""
    headers = metadata_headers(dist_dir)
    if headers is None:
        return None
    name = first(headers, "name")
    version = first(headers, "version")
    requires = headers.get("requires-dist")
    if requires is None:
        requires = egg_requires(dist_dir)  # egg-info keeps requirements in requires.txt
    if not name:
        name = os.path.basename(dist_dir).split("-")[0]
    if not name:
        return None
    direct = _direct_url(dist_dir)
    dir_info = direct.get("dir_info")
    editable = bool(isinstance(dir_info, dict) and dir_info.get("editable"))
    record = read_bytes(os.path.join(dist_dir, "RECORD"))
    installer = read_text(os.path.join(dist_dir, "INSTALLER"))
    try:
        installed_at = os.stat(dist_dir).st_mtime
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
        "location": os.path.dirname(dist_dir),
    }


# Where `import` finds these is checked against their distribution's copy (the default
# [watch] focus: the script is one text shared by every probe, so it carries no request).
FOCUS = ("sglang", "sgl-kernel", "sglang-kernel", "torch", "flashinfer-python", "nvidia-nccl-cu12", "triton",
         "transformers", "vllm")
MAX_PTH = 64  # .pth files read per site directory
MAX_PTH_BYTES = 64 * 1024
MAX_SHADOWED = 64
MAX_USER_DISTS = 4096  # distributions counted in the user site before it is called huge


def _pth_files(sites: list[str]) -> dict[str, Any]:
    """The .pth files of the site directories that run code at every interpreter start: their
    ``import`` lines (site.py executes those, and only those)."""
    found: dict[str, Any] = {}
    for site_dir in sites:
        try:
            names = sorted(n for n in os.listdir(site_dir) if n.endswith(".pth"))
        except OSError:
            continue
        for name in names[:MAX_PTH]:
            path = os.path.join(site_dir, name)
            data = read_bytes(path, MAX_PTH_BYTES + 1)
            if data is None:
                found[path] = {"imports": None, "error": "unreadable or not a regular file"}
                continue
            lines = data[:MAX_PTH_BYTES].decode("utf-8", "replace").splitlines()
            imports = [line.strip()[:300] for line in lines if line.startswith(("import ", "import\t"))]
            if imports or len(data) > MAX_PTH_BYTES:
                found[path] = {"imports": imports[:16], "error": "larger than 64 KiB" if len(data) > MAX_PTH_BYTES
                               else None}
    return found


def _user_site() -> dict[str, Any]:
    """Where this interpreter's user site-packages is, whether it is enabled and on sys.path
    (a bare interpreter, or a venv with include-system-site-packages, sees it), and how many
    distributions it holds."""
    import site

    try:
        path = site.getusersitepackages()
    except Exception as exc:  # noqa: BLE001  (a broken site.py on the host is a fact)
        return {"path": None, "enabled": None, "on_path": False, "distributions": None, "error": str(exc)}
    entry: dict[str, Any] = {"path": path, "enabled": bool(site.ENABLE_USER_SITE), "on_path": path in sys.path,
                             "distributions": None, "error": None}
    try:
        names = os.listdir(path)
    except FileNotFoundError:
        entry["distributions"] = 0
        return entry
    except OSError as exc:
        entry["error"] = exc.strerror or str(exc)
        return entry
    count = sum(1 for n in names if n.lower().endswith(_INFO_SUFFIXES))
    if count > MAX_USER_DISTS:
        entry["error"] = "more than {} distributions: not all described".format(MAX_USER_DISTS)
    entry["distributions"] = count
    return entry


def _user_bin() -> dict[str, Any]:
    """Commands in the user base's bin (~/.local/bin, where pip --user puts entry points) that
    this interpreter's own bin directory has too, with the interpreter each one's #! names: a
    login shell's PATH (Ubuntu's ~/.profile prepends ~/.local/bin) can run those instead."""
    import site

    own = os.path.dirname(sys.executable)
    try:
        path = os.path.join(site.getuserbase(), "bin")
    except Exception as exc:  # noqa: BLE001
        return {"path": None, "commands": {}, "error": str(exc)}
    out: dict[str, Any] = {"path": path, "commands": {}, "error": None}
    if os.path.realpath(path) == os.path.realpath(own):
        return out
    try:
        mine = set(os.listdir(own))
        names = sorted(os.listdir(path))
    except FileNotFoundError:
        return out
    except OSError as exc:
        out["error"] = exc.strerror or str(exc)
        return out
    for name in [n for n in names if n in mine][:MAX_PTH]:
        head = read_bytes_head(os.path.join(path, name))
        line = head.split(b"\n", 1)[0] if head.startswith(b"#!") else b""
        out["commands"][name] = line[2:].decode("utf-8", "replace").strip()[:200] or None
    return out


def read_bytes_head(path: str, limit: int = 256) -> bytes:
    return read_bytes(path, limit) or b""


def _venv() -> dict[str, Any] | None:
    """pyvenv.cfg's say on system site-packages, for a venv; None for a bare interpreter."""
    if sys.prefix == getattr(sys, "base_prefix", sys.prefix):
        return None
    text = read_text(os.path.join(sys.prefix, "pyvenv.cfg")) or ""
    include = None
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key.strip().lower() == "include-system-site-packages":
            include = value.strip().lower() == "true"
    return {"base_prefix": sys.base_prefix, "include_system_site_packages": include}


def _import_location(name: str) -> str | None:
    """Where ``import <name>`` finds the package or module, without running it."""
    try:
        spec = util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    locations = list(spec.submodule_search_locations or [])
    if locations:
        return os.path.dirname(locations[0])
    return os.path.dirname(spec.origin) if spec.origin and spec.origin != "built-in" else None


def _top_level(dist: dict[str, Any], dist_dir: str) -> str | None:
    """The import name a distribution provides: top_level.txt, else its normalized name."""
    text = read_text(os.path.join(dist_dir, "top_level.txt"))
    for line in (text or "").splitlines():
        if line.strip() and not line.startswith("_"):
            return line.strip()
    return re.sub(r"[-.]", "_", normalize(dist["name"]))


def resolution(distributions: dict[str, Any], shadowed: dict[str, Any], dirs: dict[str, str],
               focus: list[str]) -> dict[str, Any]:
    """How this interpreter finds what it imports: PYTHONPATH, the user site, .pth files that run
    code, the copies of a distribution that a first copy shadows, and, for the focus
    distributions, where ``import`` really finds their package."""
    imports = {}
    for name in focus:
        dist = distributions.get(name)
        if dist is not None and dirs.get(name):
            top = _top_level(dist, dirs[name])
            if top:
                imports[name] = {"module": top, "location": _import_location(top)}
    sites = [p for p in sys.path if p and os.path.isdir(p)]
    return {
        "pythonpath": os.environ.get("PYTHONPATH"),
        "user_site": _user_site(),
        "user_bin": _user_bin(),
        "venv": _venv(),
        "pth": _pth_files(sites),
        "shadowed": shadowed,
        "imports": imports,
    }


def collect() -> dict[str, Any]:
    drop_cwd_from_path()
    distributions: dict[str, dict[str, Any]] = {}
    shadowed: dict[str, list[dict[str, Any]]] = {}
    dirs: dict[str, str] = {}
    # sys.path order: the first hit of a name is the one that `import` and
    # importlib.metadata.version() would use, later copies are shadowed.
    for dist_dir in distribution_paths():
        facts = describe(dist_dir)
        if facts is None:
            continue
        key = normalize(facts["name"])
        if key in distributions:
            if distributions[key]["location"] != facts["location"] and len(shadowed) < MAX_SHADOWED:
                shadowed.setdefault(key, []).append({"version": facts["version"], "location": facts["location"]})
            continue
        distributions[key] = facts
        dirs[key] = dist_dir
    return {
        "executable": sys.executable,
        "version": sys.version.split()[0],
        "prefix": sys.prefix,
        # Where the libraries probe looks for wheel libraries and RECORDs, in import order.
        "sys_path": list(sys.path),
        "distributions": distributions,
        "torch": torch_version_file(),
        "resolution": resolution(distributions, shadowed, dirs, [normalize(n) for n in FOCUS]),
    }


def torch_version_file() -> dict[str, str] | None:
    """The text of ``torch/version.py``, found with ``importlib.util.find_spec``, which
    locates the package without executing its ``__init__``: importing torch would load CUDA
    libraries, take seconds and may crash, and its build facts are plain literals in that
    file anyway (the cuda probe parses them)."""
    try:
        spec = util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    for location in (spec.submodule_search_locations or []) if spec else []:
        path = os.path.join(location, "version.py")
        data = read_bytes(path, 65536)
        if data is not None:
            return {"path": path, "text": data.decode("utf-8", "replace")}
    return None


if __name__ == "__main__":
    emit(collect())
