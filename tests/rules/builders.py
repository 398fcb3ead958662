"""Real-shaped snapshots for the rule tests: the diff tests' H200 host, plus a running
server (the processes probe's shape), its log (parsed by the real log parsers) and NCCL
configuration files (the nccl_conf probe's shape)."""

from __future__ import annotations

from typing import Any

from driftwatch.launchargs import parse_launch_args
from driftwatch.logparse import detect_and_parse
from driftwatch.model import Snapshot
from driftwatch.rules.finding import Diagnosis, Finding
from driftwatch.rules.host import RuleOptions
from driftwatch.rules.registry import RULES, diagnose
from tests.diff.builders import baseline, dists, make_snapshot

SGLANG = ("python3", "-m", "sglang.launch_server", "--model-path", "/models/DeepSeek-V3")
VLLM = ("vllm", "serve", "/models/Llama-3.1-70B")
__all__ = ["baseline", "dists", "make_snapshot"]


def server(*argv: str, env: dict[str, str] | None = None, pid: int = 4242,
           workers: tuple[int, ...] = (4250, 4251)) -> dict[str, Any]:
    launch = parse_launch_args(list(argv))
    return {"kind": launch["kind"], "entry": launch["entry"], "model": launch["model"], "argv": list(argv),
            "args": launch["args"], "cwd": "/root", "exe": "/usr/bin/python3.12", "env": env if env is not None else {},
            "libraries": [], "volatile": {"pid": pid, "ppid": 1, "start_time": 1771495200.0, "descendants": list(workers)}}


def processes(*servers: dict[str, Any], login: dict[str, str] | None = None) -> dict[str, Any]:
    return {"servers": {s["entry"]: s for s in servers}, "truncated": False, "login_shell": "/bin/bash",
            "login_env": login if login is not None else {}, "login_env_error": None}


def logs(text: str, path: str = "/data/logs/server.log") -> dict[str, Any]:
    return {"logs": {"/data/logs/*.log": {"path": path, **detect_and_parse(text)}}}


def nccl_conf(settings: dict[str, str], path: str = "/etc/nccl.conf") -> dict[str, Any]:
    return {"files": {path: {"path": path, "via": [], "exists": True, "error": None, "settings": settings,
                             "sha256": "0" * 64, "truncated": False, "volatile": {"mtime": 1771495200.0}}},
            "conf_file_error": None}


def run(rule: str, snapshot: Snapshot, options: RuleOptions | None = None) -> Diagnosis:
    """One rule of the registry over ``snapshot``."""
    return diagnose(snapshot, options, rules={rule: RULES[rule]})


def found(rule: str, snapshot: Snapshot, options: RuleOptions | None = None) -> list[Finding]:
    diagnosis = run(rule, snapshot, options)
    assert rule in diagnosis.ran, f"{rule} did not run: {diagnosis.not_run}"
    return diagnosis.findings


def not_run(rule: str, snapshot: Snapshot) -> str:
    """Why ``rule`` could not run on ``snapshot`` (and it said nothing)."""
    diagnosis = run(rule, snapshot)
    assert diagnosis.findings == [] and rule not in diagnosis.ran
    [reason] = diagnosis.not_run
    return reason.why
