"""Launch settings across argv and the server's log: one setting per name, typed values,
and a KV budget that says what was computed and what the log shows."""

from __future__ import annotations

from typing import Any

from driftwatch.explain import diff_snapshots
from driftwatch.launchargs import parse_launch_args
from driftwatch.logparse import detect_and_parse
from driftwatch.model import ProbeStatus
from tests.diff.builders import failed, make_snapshot
from tests.seed import seed_log

VLLM_LOG = (
    "INFO 01-11 05:52:49 api_server.py:712] vLLM API server version 0.6.6\n"
    "INFO 01-11 05:52:49 api_server.py:713] non-default args: {'model': '/models/Llama-3.1-70B', "
    "'tensor_parallel_size': 8, 'gpu_memory_utilization': 0.9}\n"
)


def processes(*argv: str) -> dict[str, Any]:
    launch = parse_launch_args(list(argv))
    server = {"kind": launch["kind"], "entry": launch["entry"], "model": launch["model"], "argv": list(argv),
              "args": launch["args"], "env": {}, "libraries": [], "volatile": {}}
    return {"servers": {launch["entry"]: server}, "truncated": False, "login_env": {}, "login_env_error": None}


def logs(text: str) -> dict[str, Any]:
    return {"logs": {"/var/log/server/*.log": {"path": "/var/log/server/a.log", **detect_and_parse(text)}}}


SGLANG = ("python3", "-m", "sglang.launch_server", "--model-path", "/models/DeepSeek-V3")


def launch_changes(old: dict[str, Any], new: dict[str, Any]) -> list[Any]:
    result = diff_snapshots(make_snapshot(**old), make_snapshot(minutes=60, **new))
    return [c for c in result.changes if c.category == "launch-arg"]


def test_an_abbreviated_flag_is_the_setting_the_log_names() -> None:
    # The good run's log says tp_size=8; the new server was started with `--tp 8`.
    old = {"processes": processes(*SGLANG), "logs": logs(seed_log(0.88, fails=False))}
    new = {"processes": processes(*SGLANG, "--tp", "8"), "logs": logs(seed_log(0.88, fails=False))}
    assert launch_changes(old, new) == []


def test_vllm_short_flag_is_the_logged_field() -> None:
    vllm = ("vllm", "serve", "/models/Llama-3.1-70B")
    old = {"processes": processes(*vllm), "logs": logs(VLLM_LOG)}
    new = {"processes": processes(*vllm, "-tp", "8"), "logs": logs(VLLM_LOG)}
    assert launch_changes(old, new) == []


def test_values_keep_their_types_on_both_sides() -> None:
    old = {"processes": processes(*SGLANG), "logs": logs(seed_log(0.88, fails=False))}
    new = {"processes": processes(*SGLANG, "--mem-fraction-static", "0.55", "--tp-size", "4"),
           "logs": logs(seed_log(0.88, fails=False))}
    found = {c.item: (c.old, c.new) for c in launch_changes(old, new)}
    assert found["mem_fraction_static"] == (0.88, 0.55)
    assert found["tp_size"] == (8, 4) and all(type(v) is int for v in found["tp_size"])


def fraction_change(new_log: str) -> str:
    old = {"processes": processes(*SGLANG), "logs": logs(seed_log(0.88, fails=False))}
    new = {"processes": processes(*SGLANG, "--mem-fraction-static", "0.55"), "logs": logs(new_log)}
    [change] = [c for c in launch_changes(old, new) if c.item == "mem_fraction_static"]
    return change.explanation


def test_negative_budget_with_the_error_logged_is_observed() -> None:
    why = fraction_change(seed_log(0.55, fails=True))
    assert "the KV budget would be -41.5 GiB: SGLang cannot start with this" in why
    assert "the new log shows it failed: RuntimeError: Not enough memory" in why and "(8×)" in why
    assert "predicted" not in why


def test_negative_budget_without_an_error_is_only_predicted() -> None:
    # The new run's log stops after loading weights: no error (yet), and not ready.
    log = "".join(line + "\n" for line in seed_log(0.55, fails=True).splitlines() if "Scheduler" not in line
                  and "RuntimeError" not in line and "File" not in line and "scheduler =" not in line)
    why = fraction_change(log)
    assert "the KV budget would be -41.5 GiB" in why and "(predicted: the new log shows no such error)" in why
    assert "Not enough memory" not in why and "hence" not in why


def test_negative_budget_but_ready_says_the_numbers_disagree() -> None:
    why = fraction_change(seed_log(0.55, fails=False))
    assert "reached 'ready'" in why and "failed" not in why


def test_an_unreadable_log_unsets_nothing() -> None:
    old = {"processes": processes(*SGLANG), "logs": logs(seed_log(0.88, fails=False))}
    for broken in (failed(ProbeStatus.timeout, "timed out after 10s"),
                   {"logs": {"/var/log/server/*.log": {"path": "/var/log/server/a.log", "error": "Permission denied"}}}):
        new = {"processes": processes(*SGLANG), "logs": broken}
        assert launch_changes(old, new) == [], broken


def test_a_stopped_server_has_no_flags_to_compare() -> None:
    old = {"processes": processes(*SGLANG, "--port", "30000"), "logs": logs(seed_log(0.88, fails=False))}
    new = {"processes": {"servers": {}, "truncated": False, "login_env": {}, "login_env_error": None},
           "logs": logs(seed_log(0.88, fails=False))}
    assert launch_changes(old, new) == []
