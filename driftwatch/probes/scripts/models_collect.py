# Runs ON THE TARGET under any python3 >= 3.6, stdlib only. Reads a JSON request on
# stdin, prints one JSON document: for each model, local directory, single model file (a
# GGUF) or Hugging Face hub cache entry, the small files that change behaviour (sha256 or
# hub blob name, and for JSON the top-level values) and the name and size of each weight
# file. Weights are never read;
# a small file whose stat key (or hub blob) is unchanged is not read again. Paths never
# pass through a shell.
import fnmatch
import hashlib
import json
import os
import re
import sys
import time

CHUNK = 1024 * 1024
BLOB = re.compile(r"^[0-9a-f]{40}$|^[0-9a-f]{64}$")  # git blob sha1, or LFS sha256


def repo_folder(repo):
    """huggingface_hub's repo_folder_name: models--ORG--NAME."""
    return "--".join(["models"] + repo.split("/"))


def printable(text):
    """``text`` as valid UTF-8: undecodable bytes of a name, or lone surrogates a JSON file
    spelled as escapes, become "?"."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


def short(text, limit):
    text = printable(text)
    if len(text) <= limit:
        return text
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"<{len(text)} chars, sha256 {digest}>"


def values_of(data, request):
    """Top-level values of a JSON object: scalars as they are, long strings and nested
    values as a bounded text, at most max_values keys (in the file's order)."""
    try:
        doc = json.loads(data.decode("utf-8"))
    except ValueError:
        return None
    if not isinstance(doc, dict):
        return None
    out = {}
    limit = int(request["max_string"])
    for key in list(doc)[: int(request["max_values"])]:
        value = doc[key]
        if isinstance(value, str):
            value = short(value, limit)
        elif value is not None and not isinstance(value, (bool, int, float)):
            value = short(json.dumps(value, sort_keys=True), limit)
        out[short(str(key), limit)] = value
    return out


def read_small(path, name, request, counts):
    """sha256 of a small file and, for JSON, its values; one read."""
    digest = hashlib.sha256()
    data = bytearray()
    keep = name.endswith(".json")
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(CHUNK), b""):
            digest.update(block)
            if keep and len(data) <= int(request["max_values_bytes"]):
                data += block
    counts["read"] += 1
    values = values_of(bytes(data), request) if keep and len(data) <= int(request["max_values_bytes"]) else None
    return digest.hexdigest(), values


def is_small(name, request):
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in request["small"])


def describe_file(path, rel, request, known, counts, weight=False):
    """One small or weight file (``weight``: whatever its name); None for anything else."""
    name = rel.rsplit("/", 1)[-1]
    small = is_small(name, request) and not weight
    if not small and not weight and not name.endswith(tuple(request["weights"])):
        return None
    entry = {"kind": "small" if small else "weight", "error": None}
    try:
        link = os.readlink(path) if os.path.islink(path) else None
        st = os.stat(path)
    except OSError as exc:
        entry["error"] = exc.strerror or str(exc)
        return entry
    blob = os.path.basename(link) if link and BLOB.match(os.path.basename(link)) else None
    entry.update(size=st.st_size, mtime=st.st_mtime, blob=blob,
                 volatile={"mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns, "inode": st.st_ino})
    if not small:
        return entry
    before = known.get(rel) or {}
    # A hub blob's name is its content hash; a local file is unchanged when its stat key is.
    same = (blob is not None and before.get("blob") == blob) or (
        blob is None and before.get("stat") == [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino])
    if same:
        entry["reused"] = True
        counts["reused"] += 1
        return entry
    if st.st_size > int(request["max_small_bytes"]):
        entry["error"] = "not read: too large"
        return entry
    try:
        entry["sha256"], entry["values"] = read_small(path, name, request, counts)
    except OSError as exc:
        entry["error"] = exc.strerror or str(exc)
    return entry


def walk(root, request, known, counts, deadline):
    """Small and weight files under ``root``, depth and count bounded. Symlinks to files
    are followed (that is how the hub cache points at its blobs); to directories, never."""
    files, truncated, others = {}, None, 0
    stack = [(root, "", 0)]
    seen = 0
    while stack and truncated is None:
        path, rel, depth = stack.pop()
        try:
            with os.scandir(path) as listing:
                children = sorted(listing, key=lambda e: e.name)
        except OSError as exc:
            if not rel:
                raise
            files[printable(rel) + "/"] = {"kind": "dir", "error": exc.strerror or str(exc)}
            continue
        for child in children:
            seen += 1
            if seen > int(request["max_files"]) or time.monotonic() > deadline:
                truncated = "files" if seen > int(request["max_files"]) else "time"
                break
            child_rel = rel + "/" + child.name if rel else child.name
            if child.is_dir(follow_symlinks=False):
                if depth + 1 < int(request["max_depth"]) and not child.name.startswith("."):
                    stack.append((child.path, child_rel, depth + 1))
                continue
            entry = describe_file(child.path, child_rel, request, known, counts)
            if entry is None:
                others += 1
            else:
                files[printable(child_rel)] = entry
    return files, truncated, others


def read_text(path, limit=256):
    with open(path, "rb") as handle:
        return handle.read(limit).decode("utf-8", "replace").strip()


def hub(model, request, known, counts, deadline):
    repo_dir = os.path.join(os.path.expanduser(model["cache"]), repo_folder(model["repo"]))
    out = {"path": repo_dir, "exists": os.path.isdir(repo_dir), "revision": None, "refs": {}}
    if not out["exists"]:
        return out
    refs_dir = os.path.join(repo_dir, "refs")
    for dirpath, _, names in os.walk(refs_dir):
        for name in sorted(names)[:32]:
            ref = os.path.relpath(os.path.join(dirpath, name), refs_dir)
            try:
                out["refs"][printable(ref)] = read_text(os.path.join(dirpath, name))
            except OSError as exc:
                out["refs"][printable(ref)] = f"unreadable: {exc.strerror or exc}"
    wanted = model.get("revision") or "main"
    revision = out["refs"].get(wanted) or (wanted if os.path.isdir(os.path.join(repo_dir, "snapshots", wanted)) else None)
    if revision is None:
        out["error"] = f"no ref {wanted} in the hub cache"
        return out
    out["revision"] = revision
    snapshot = os.path.join(repo_dir, "snapshots", revision)
    if not os.path.isdir(snapshot):
        out["error"] = f"snapshot {revision} is not in the hub cache"
        return out
    out["files"], out["truncated"], out["other_files"] = walk(snapshot, request, known, counts, deadline)
    return out


def local(model, request, known, counts, deadline):
    path = os.path.expanduser(model["path"])
    if os.path.isfile(path):  # one weight file: a GGUF served by llama.cpp or vLLM, a checkpoint
        name = printable(os.path.basename(path))
        entry = describe_file(path, name, request, known, counts, weight=True)
        return {"path": path, "exists": True, "files": {name: entry}, "truncated": None, "other_files": 0}
    out = {"path": path, "exists": os.path.isdir(path)}
    if not out["exists"]:
        if os.path.lexists(path):
            out["error"] = "neither a directory nor a file"
        return out
    out["files"], out["truncated"], out["other_files"] = walk(path, request, known, counts, deadline)
    return out


def main():
    request = json.load(sys.stdin)
    deadline = time.monotonic() + float(request["seconds"])
    counts = {"read": 0, "reused": 0}
    models = {}
    for model in request["models"]:
        known = (request.get("known") or {}).get(model["key"]) or {}
        kind = model["kind"]
        if kind == "auto":  # a server's model: a directory or file relative to its cwd, else a hub id
            candidate = os.path.join(model.get("cwd") or "", model["path"])
            on_disk = os.path.isdir(candidate) or os.path.isfile(candidate)
            kind, model = ("local", dict(model, path=candidate)) if on_disk else ("hub", model)
        try:
            found = (local if kind == "local" else hub)(model, request, known, counts, deadline)
        except OSError as exc:
            found = {"path": model.get("path") or model.get("repo"), "exists": True, "error": exc.strerror or str(exc)}
        found["kind"] = kind
        models[model["key"]] = found
    json.dump({"models": models, "counts": counts}, sys.stdout)


main()
