# Runs ON THE TARGET under any python3 >= 3.6, stdlib only. Reads a JSON request on
# stdin, prints one JSON document: for each NCCL configuration file asked for, whether it
# exists and its first max_bytes as text (the collector parses it the way NCCL does).
# Paths never pass through a shell.
import hashlib
import json
import os
import stat
import sys


def read(path, limit):
    out = {"path": path, "exists": False, "error": None, "text": None, "truncated": False, "sha256": None}
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return out
    except OSError as exc:
        out["exists"] = os.path.lexists(path)
        out["error"] = exc.strerror or str(exc)
        return out
    out["exists"] = True
    out["mtime"] = st.st_mtime
    if not stat.S_ISREG(st.st_mode):
        out["error"] = "not a regular file"
        return out
    try:
        with open(path, "rb") as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        out["error"] = exc.strerror or str(exc)
        return out
    out["truncated"] = len(data) > limit
    data = data[:limit]
    out["sha256"] = hashlib.sha256(data).hexdigest()
    out["text"] = data.decode("utf-8", "replace")
    return out


def main():
    request = json.load(sys.stdin)
    limit = int(request["max_bytes"])
    files = {}
    for spec in request["files"]:
        files[spec["key"]] = read(os.path.expanduser(spec["path"]), limit)
    json.dump({"files": files}, sys.stdout)


main()
