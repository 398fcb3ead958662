"""Fleet facts of what runs on the host: git trees, watched files, servers, logs, launch args.

Paths of logs, pids, start times and log sizes differ between identical hosts, and a
log's memory readings move with the model's load: none of them is compared.
"""

from __future__ import annotations

from typing import Any

from driftwatch.diff.change import Severity
from driftwatch.diff.files import OUT_OF_TIME
from driftwatch.facts.names import under_home
from driftwatch.facts.read import as_dict
from driftwatch.diff.launch import flag, severity_of
from driftwatch.facts.launch import launch_settings
from driftwatch.fleet.facts import Area, Fact, FactMap, HostView, freeze
from driftwatch.model import Snapshot

SERVERS = "processes.servers"


def git_facts(facts: dict[str, Any], view: HostView) -> tuple[FactMap, frozenset[str]]:
    out: FactMap = {}
    for repo, entry in as_dict(facts.get("repos")).items():
        e, base = as_dict(entry), f"git[{repo}]"
        head = f"error: {e['error']}" if e.get("error") else freeze(e.get("head"))
        out[base] = Fact("git", "git", repo, f"{repo} HEAD", head, Severity.medium)
        # describe, subject and date follow from HEAD; path from where ~ expands.
        for key, words in (("branch", "branch"), ("dirty", "uncommitted files"), ("diff_sha256", "uncommitted diff")):
            out[f"{base}.{key}"] = Fact("git", "git", repo, f"{repo} {words}", freeze(e.get(key)),
                                        Severity.medium, within=base)
    return out, frozenset({"repos"})


def files_facts(facts: dict[str, Any], view: HostView) -> tuple[FactMap, frozenset[str]]:
    out: FactMap = {}
    for path, entry in under_home(as_dict(facts.get("files")), facts.get("home")).items():
        e, base = as_dict(entry), f"file[{path}]"
        # Content is the fact (mtime differs wherever the file was copied at another time).
        content = f"error: {e['error']}" if e.get("error") else freeze(e.get("sha256"))
        out[base] = Fact("files", "file", path, path, content, Severity.medium, why=" (content differs)",
                         unknown=e.get("error") == OUT_OF_TIME)
        out[f"{base}.mode"] = Fact("files", "file", path, f"{path} mode", freeze(e.get("mode")),
                                   Severity.medium, within=base)
    if "truncated" in facts:
        out["files.truncated"] = Fact("files", "file", "(file list)", "more files than max_files",
                                      freeze(facts["truncated"]), Severity.low)
    return out, frozenset({"files", "patterns", "truncated", "truncated_reason", "home"})


def files_content(facts: dict[str, Any]) -> Any:
    """Everything ``files_facts`` reads, cheaply (gather.py digests it for thousands of hosts):
    per file its error, content and mode (not its mtime: identity), and the other keys."""
    files = [(path, e.get("error"), e.get("sha256"), e.get("mode")) if type(e) is dict else (path, repr(e))
             for path, e in as_dict(facts.get("files")).items()]
    return files, [(k, v) for k, v in facts.items() if k != "files"]


def processes_facts(facts: dict[str, Any], view: HostView) -> tuple[FactMap, frozenset[str]]:
    servers = as_dict(facts.get("servers"))
    out: FactMap = {
        SERVERS: Fact("processes", "process", "servers", "running servers", tuple(sorted(servers)), Severity.high)
    }
    for key, server in servers.items():
        s = as_dict(server)
        for name, value in as_dict(s.get("env")).items():
            out[f"process[{key}].env[{name}]"] = Fact("processes", "env", name, f"{name} ({key})",
                                                      freeze(value), Severity.high, within=SERVERS)
        for field, severity in (("libraries", Severity.medium), ("exe", Severity.medium), ("cwd", Severity.low)):
            value = tuple(sorted(map(str, s[field]))) if isinstance(s.get(field), list) else freeze(s.get(field))
            out[f"process[{key}].{field}"] = Fact("processes", "process", key, f"{key} {field}", value,
                                                  severity, within=SERVERS)
    for name, value in as_dict(facts.get("login_env")).items():
        out[f"login_env[{name}]"] = Fact("processes", "env", name, f"{name} (login shell)", freeze(value), Severity.high)
    for field in ("login_shell", "login_env_error", "truncated"):
        if field in facts:
            out[f"processes.{field}"] = Fact("processes", "process", field, field, freeze(facts[field]), Severity.low)
    # argv and args are compared as launch settings (launch_facts), with the log's.
    return out, frozenset({"servers", "login_env", "login_shell", "login_env_error", "truncated"})


def logs_facts(facts: dict[str, Any], view: HostView) -> tuple[FactMap, frozenset[str]]:
    out: FactMap = {}
    for pattern, entry in as_dict(facts.get("logs")).items():
        e, base = as_dict(entry), f"log[{pattern}]"
        out[base] = Fact("logs", "log", pattern, f"log {pattern}", f"error: {e['error']}" if e.get("error") else "ok", Severity.low)
        kinds = tuple(sorted({str(as_dict(x).get("kind")) for x in e.get("errors") or []}))
        for key, category, severity, words, value in (
            ("ready", "log", Severity.medium, "server reached ready", freeze(e.get("ready"))),
            ("nccl_versions", "nccl", Severity.high, "NCCL the server loaded", freeze(e.get("nccl_versions"))),
            ("errors", "log", Severity.medium, "server errors", kinds),
        ):
            out[f"{base}.{key}"] = Fact("logs", category, pattern, f"{words} ({pattern})", value, severity, within=base)
    # Everything else a log yields is a reading of one run (memory, sizes, paths).
    return out, frozenset({"logs"})


def launch_facts(snapshot: Snapshot) -> FactMap:
    """Effective launch settings (argv over the log's), as the diff reads them."""
    out: FactMap = {}
    for key, (value, source) in launch_settings(snapshot).items():
        severity = max(severity_of(key), Severity.high, key=lambda s: s.rank)
        note = "set explicitly" if source == "explicit" else "effective, from the log"
        # "0.55" in argv equals 0.55 in the log, and "True" equals True.
        shown = freeze(value) if isinstance(value, list | dict) else str(value).lower()
        out[f"launch[{key}]"] = Fact("processes", "launch-arg", key, flag(key), shown, severity,
                                     within=SERVERS, note=note)
    return out


RUNTIME_AREAS: dict[str, Area] = {
    "git": git_facts,
    "files": files_facts,
    "processes": processes_facts,
    "logs": logs_facts,
}
