# Runs ON THE TARGET under any python3 >= 3.6, stdlib only. Reads a JSON request on
# stdin, prints one JSON document: the processes whose command line holds a requested
# pattern, with their argv, start time, cwd, exe, filtered environment and mapped
# libraries (see driftwatch/probes/processes.py). Every /proc read is bounded and
# may fail (process gone, other user's process): a failed read drops that field or that
# process, never the report. Nothing here names a server: the patterns arrive on stdin,
# so this script's own command line (and its parents') never matches them.
import fnmatch
import json
import os
import re
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:  # type checkers only; the annotations are strings: importing typing costs ~5 ms per start
    from typing import Dict, List, Optional

    from driftwatch.probes.scripts.process_context import host_context, host_report, process_context  # noqa: TC004

# A launcher that forks the real server (and lingers) is looked through, not recorded.
WRAPPERS = {"sh", "bash", "dash", "zsh", "ksh", "timeout", "nohup", "env", "numactl", "taskset",
            "setsid", "stdbuf", "nice", "ionice", "chrt", "sudo", "su", "runuser", "script", "tmux",
            "screen", "uv", "conda", "mamba", "micromamba", "poetry", "pipenv", "pixi"}
REDACTED = "<redacted>"


def read_bounded(path: str, limit: int) -> "Optional[bytes]":
    try:
        with open(path, "rb") as handle:
            return handle.read(limit)
    except (OSError, ValueError):  # gone, permission denied, not a process any more
        return None


def readlink(path: str) -> "Optional[str]":
    try:
        return os.readlink(path)
    except OSError:
        return None


def split_nul(data: bytes) -> "List[str]":
    parts = [part.decode("utf-8", "replace") for part in data.split(b"\0")]
    return parts[:-1] if parts and parts[-1] == "" else parts


def stat_fields(pid: int) -> "Optional[List[str]]":
    """Fields of /proc/PID/stat after the command name (which may hold spaces and ')')."""
    data = read_bounded("/proc/%d/stat" % pid, 4096)
    if not data:
        return None
    text = data.decode("ascii", "replace")
    return text[text.rfind(")") + 2:].split()


def boot_time() -> float:
    for line in (read_bounded("/proc/stat", 1 << 20) or b"").decode("ascii", "replace").splitlines():
        if line.startswith("btime "):
            return float(line.split()[1])
    return time.time() - float((read_bounded("/proc/uptime", 100) or b"0").split()[0])


class Redactor:
    """The collector's name and token rules, shipped in the request (driftwatch/redact.py)."""

    def __init__(self, request: "Dict") -> None:
        rules = {key: re.compile(request[key]) for key in
                 ("secret_name_re", "url_secret_name_re", "url_head_re", "token_re") if request.get(key)}
        self.names = rules.get("secret_name_re")
        self.url_names = rules.get("url_secret_name_re")
        self.url_head = rules.get("url_head_re")
        self.tokens = rules.get("token_re")
        self.not_secret = set(request.get("not_secret") or [])

    def secret(self, name: str) -> bool:
        upper = name.strip().upper()
        return bool(self.names and upper not in self.not_secret and self.names.search(upper))

    def hide(self, name: str, value: str) -> str:
        """A secret's value: a webhook/DSN URL keeps scheme://host/, anything else goes."""
        head = self.url_head.match(value.strip()) if self.url_head else None
        if head and self.url_names and self.url_names.search(name.strip().lstrip("-").replace("-", "_").upper()):
            return head.group("scheme") + head.group("host") + "/" + REDACTED
        return REDACTED

    def value(self, value: str) -> str:
        return self.tokens.sub(REDACTED, value) if self.tokens else value

    def env(self, env: "Dict[str, str]") -> "Dict[str, str]":
        return dict((k, self.hide(k, v) if self.secret(k) else self.value(v)) for k, v in env.items())

    def argv(self, argv: "List[str]") -> "List[str]":
        out, flag = [], ""  # flag: the secret flag whose value the next word is
        for arg in argv:
            if flag and not arg.startswith("--"):
                out.append(self.hide(flag, arg))
                flag = ""
                continue
            head, eq, value = arg.partition("=")
            name = head.lstrip("-").replace("-", "_")
            flag = head if arg.startswith("-") and not eq and self.secret(name) else ""
            out.append(head + "=" + self.hide(head, value) if eq and self.secret(name) else self.value(arg))
        return out


def env_filter(pairs: "Dict[str, str]", request: "Dict") -> "Dict[str, str]":
    keep = request.get("always_env") or []
    globs = request.get("env") or []
    return dict((k, v) for k, v in pairs.items() if k in keep or any(fnmatch.fnmatchcase(k, g) for g in globs))


def parse_environ(data: bytes) -> "Dict[str, str]":
    env = {}
    for item in split_nul(data):
        name, eq, value = item.partition("=")
        if eq and name:
            env[name] = value
    return env


# A shared object as /proc/PID/maps names it: libnccl.so.2.28.9, _C.abi3.so, and the
# kernel's " (deleted)" when the file was removed or replaced after it was mapped.
SHARED_OBJECT = re.compile(r"\.so(\.[0-9][0-9.]*)?( \(deleted\))?$")


def mappings(pid: int, request: "Dict") -> "tuple":
    """The mapped libraries the markers select (sorted paths), and, when the request asks
    for ``mapped``, every mapped shared object as {path as maps shows it: its first address
    range}; (None, None) when the maps cannot be read."""
    data = read_bounded("/proc/%d/maps" % pid, request["max_bytes"])
    if data is None:
        return None, None
    found = set()
    mapped = {}  # type: Dict[str, str]
    excluded = request.get("mapped_exclude") or []
    limit = request.get("max_mapped", 2048) if request.get("mapped") else 0
    for line in data.decode("utf-8", "replace").splitlines():
        parts = line.split(None, 5)  # the path (6th column) may contain spaces
        if len(parts) != 6:
            continue
        path = parts[5].strip()
        if any(marker in path for marker in request["lib_markers"]):
            found.add(path)
        if (len(mapped) < limit and path not in mapped and path.startswith("/") and SHARED_OBJECT.search(path)
                and not any(part in path for part in excluded)):
            mapped[path] = parts[0]
    return sorted(found)[: request.get("max_libraries", 512)], (mapped if limit else None)


def describe(pid: int, pattern: str, argv: "List[str]", request: "Dict", btime: float, red: Redactor,
             host: "Optional[Dict]" = None) -> "Optional[Dict]":
    fields = stat_fields(pid)
    if not fields or len(fields) < 20:
        return None  # exited since its command line was read
    environ = read_bounded("/proc/%d/environ" % pid, request["max_bytes"])
    libraries, mapped = mappings(pid, request)
    entry = {
        "pid": pid, "ppid": int(fields[1]), "pattern": pattern, "argv": red.argv(argv),
        "start_time": round(btime + int(fields[19]) / float(os.sysconf("SC_CLK_TCK")), 2),
        "cwd": readlink("/proc/%d/cwd" % pid), "exe": readlink("/proc/%d/exe" % pid),
        "env": None if environ is None else red.env(env_filter(parse_environ(environ), request)),
        "libraries": libraries,
    }
    if mapped is not None:
        entry["mapped"] = mapped
    if host is not None:  # the prelude process_context.py, sent when the request asks for it
        entry["context"] = process_context(pid, request, host)
    return entry


def ancestors(pid: int, limit: int = 64) -> "List[int]":
    chain: "List[int]" = []
    while len(chain) < limit:
        fields = stat_fields(pid)
        if not fields or int(fields[1]) <= 1:
            return chain
        pid = int(fields[1])
        chain.append(pid)
    return chain


def matching(request: "Dict", skip: set) -> "Dict[int, tuple]":
    found = {}
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in skip:
            continue
        raw = read_bounded("/proc/%s/cmdline" % name, request["max_bytes"])
        argv = split_nul(raw) if raw else []
        joined = " ".join(argv)
        hit = next((p for p in request["patterns"] if p and p in joined), None)
        if hit is not None:
            found[int(name)] = (argv, hit)
    return found


def servers(found: "Dict[int, tuple]") -> "List[int]":
    """Drop forked workers (a matching non-wrapper ancestor) and wrappers of a match."""
    def wrapper(pid: int) -> bool:
        argv = found[pid][0]
        return bool(argv) and os.path.basename(argv[0]) in WRAPPERS
    above = dict((pid, [a for a in ancestors(pid) if a in found]) for pid in found)
    has_match_below = set(a for chain in above.values() for a in chain)
    return [pid for pid in sorted(found)
            if not any(not wrapper(a) for a in above[pid]) and not (wrapper(pid) and pid in has_match_below)]


def descendants(roots: "List[int]", limit: int) -> "Dict[int, List[int]]":
    """Every process below each root (its workers: SGLang's scheduler ranks, vLLM's engine
    core), from one pass over /proc/*/stat; at most ``limit`` per root."""
    children = {}  # type: Dict[int, List[int]]
    for name in os.listdir("/proc"):
        fields = stat_fields(int(name)) if name.isdigit() else None
        if fields:
            children.setdefault(int(fields[1]), []).append(int(name))
    below = {}  # type: Dict[int, List[int]]
    for root in roots:
        seen, queue = [], list(children.get(root, []))
        while queue and len(seen) < limit:
            pid = queue.pop(0)
            if pid not in seen:
                seen.append(pid)
                queue.extend(children.get(pid, []))
        below[root] = sorted(seen)
    return below


def main() -> None:
    request = json.load(sys.stdin)
    if not os.path.isdir("/proc/self"):
        json.dump({"error": "no /proc on this host"}, sys.stdout)
        return
    red = Redactor(request)
    me = os.getpid()
    found = matching(request, set([me] + ancestors(me)))
    kept = servers(found)
    btime = boot_time()
    host = host_context() if request.get("context") else None
    processes: "List[Dict]" = []
    truncated = False
    for pid in kept:
        if len(processes) >= request["max_processes"]:
            truncated = True
            break
        entry = describe(pid, found[pid][1], found[pid][0], request, btime, red, host)
        if entry is not None:
            processes.append(entry)
    below = descendants([p["pid"] for p in processes], request.get("max_descendants", 1024)) if processes else {}
    for entry in processes:
        entry["descendants"] = below.get(entry["pid"], [])
    report = {"processes": processes, "truncated": truncated}
    if host is not None:
        report.update(host_report(host, processes))
    json.dump(report, sys.stdout)


if __name__ == "__main__":
    main()
