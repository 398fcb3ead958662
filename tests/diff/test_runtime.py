"""The running server and its log: an unreadable side is unknown, never "unset" or "gone"."""

from __future__ import annotations

from typing import Any

from driftwatch.diff import Severity

from driftwatch.explain import diff_snapshots
from tests.diff.builders import make_snapshot

LOG = "/var/log/sglang/*.log"


def server(env: dict[str, str] | None) -> dict[str, Any]:
    return {"kind": "sglang", "entry": "sglang.launch_server", "model": "/m", "argv": [], "args": {},
            "env": env, "libraries": ["/usr/lib/libnccl.so.2"], "volatile": {}}


def processes(env: dict[str, str] | None, login: dict[str, str] | None, login_error: str | None = None) -> dict[str, Any]:
    return {"servers": {"sglang.launch_server": server(env)}, "truncated": False, "login_shell": "/bin/bash",
            "login_env": login, "login_env_error": login_error}


def log(**facts: Any) -> dict[str, Any]:
    return {"logs": {LOG: {"path": "/var/log/sglang/a.log", **facts}}}


def changes(old: dict[str, Any], new: dict[str, Any]) -> list[Any]:
    return diff_snapshots(make_snapshot(**old), make_snapshot(minutes=5, **new)).changes


def test_unreadable_environments_unset_nothing() -> None:
    env = {"NCCL_DEBUG": "INFO", "CUDA_VISIBLE_DEVICES": "0,1"}
    found = changes({"processes": processes(env, env)},
                    {"processes": processes(None, None, "login shell: timed out after 10s")})
    assert [(c.category, c.item, c.severity) for c in found] == [("env", "(login shell)", Severity.low)]
    assert "could not be read" in found[0].explanation and "timed out" in found[0].explanation


def test_an_unreadable_log_is_one_finding_not_lost_facts() -> None:
    good = log(kind="sglang", ready=True, errors=[], nccl_versions=["2.27.3"], memory={}, key_args={})
    found = changes({"logs": good}, {"logs": log(error="Permission denied")})
    assert [(c.category, c.severity) for c in found] == [("log", Severity.low)]
    assert "could not be read: Permission denied" in found[0].explanation
    assert "NCCL" not in found[0].explanation
