# Runs ON THE TARGET as `<python> -` after the prelude dists.py, stdlib only, never importing
# what it describes. REQUEST (set above this script by the probe) names, per serving engine
# distribution, the settings to look for; for each engine this interpreter has, the script
# records its version and whether its own source names each setting at all: a variable the
# installed engine never names is one it cannot read (vllm-project/vllm#50292). The walk is
# bounded in files, bytes and time; a name not found before a bound is unknown, never absent.
import base64
import hashlib
import time

TYPE_CHECKING = False
if TYPE_CHECKING:  # for type checkers only
    from driftwatch.probes.scripts.dists import *  # noqa: F403  (the prelude, sent first)

MAX_FILE = 4 * 1024 * 1024


def package_dir(package):
    """The directory of the top-level package, found as the import system would find it
    (no module is executed: find_spec of a top-level name only searches sys.path)."""
    from importlib import util

    try:
        spec = util.find_spec(package)
    except (ImportError, ValueError):
        return None
    locations = list(spec.submodule_search_locations or []) if spec else []
    return locations[0] if locations else None


def scan(root, names, budget):
    """(found names, files read, bytes read, why the walk stopped early or None)."""
    pattern = re.compile(r"(?<![A-Za-z0-9_])(" + "|".join(re.escape(n) for n in names) + r")(?![A-Za-z0-9_])")
    found, files, read, stop = set(), 0, 0, None
    for directory, subdirs, filenames in os.walk(root):
        subdirs.sort()
        for filename in sorted(filenames):
            if not filename.endswith(".py"):
                continue
            if files >= budget["max_files"] or read >= budget["max_bytes"]:
                return found, files, read, "size"
            if time.monotonic() > budget["deadline"]:
                return found, files, read, "time"
            data = read_bytes(os.path.join(directory, filename))
            if data is None:
                continue
            data = data[:MAX_FILE]
            files, read = files + 1, read + len(data)
            found.update(pattern.findall(data.decode("utf-8", "replace")))
            if len(found) == len(names):
                return found, files, read, stop
    return found, files, read, stop


def describe(name, spec, previous, budget):
    for path in distribution_paths():
        headers = metadata_headers(path)
        if not headers or normalize(first(headers, "name") or "") != name:
            continue
        record = read_bytes(os.path.join(path, "RECORD"))
        digest = hashlib.sha256(record).hexdigest() if record is not None else None
        out = {"version": first(headers, "version"), "dist_info": path, "record_sha256": digest,
               "package_dir": package_dir(spec["package"]), "names": {}, "files": 0, "bytes": 0,
               "truncated": None, "error": None}
        known = {}
        if previous and digest and previous.get("record_sha256") == digest:
            known = {k: v for k, v in (previous.get("names") or {}).items() if isinstance(v, bool)}
        todo = [n for n in spec["names"] if n not in known]
        found = set()
        if todo and out["package_dir"]:
            found, out["files"], out["bytes"], out["truncated"] = scan(out["package_dir"], todo, budget)
        elif todo:
            out["error"] = "the package directory of " + spec["package"] + " was not found on sys.path"
        for n in spec["names"]:
            if n in known:
                out["names"][n] = known[n]
            elif n in found:
                out["names"][n] = True
            else:
                out["names"][n] = None if out["truncated"] or out["error"] else False
        return out
    return None


def main():
    request = json.loads(base64.b64decode(REQUEST).decode("utf-8"))  # set by the probe
    drop_cwd_from_path()
    budget = {"deadline": time.monotonic() + float(request["seconds"]), "max_files": int(request["max_files"]),
              "max_bytes": int(request["max_bytes"])}
    engines = {}
    for name, spec in request["engines"].items():
        try:
            found = describe(name, spec, (request.get("previous") or {}).get(name), budget)
        except Exception as exc:  # noqa: BLE001  (one engine never costs the others)
            found = {"error": type(exc).__name__ + ": " + str(exc)}
        if found is not None:
            engines[name] = found
    emit({"executable": sys.executable, "engines": engines})


main()
