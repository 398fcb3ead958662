"""Engine settings nothing reads."""

from __future__ import annotations

from typing import Any

from driftwatch.severity import Severity
from tests.rules.builders import VLLM, found, logs, make_snapshot, processes, server


def snapshot(version: str, named: bool | None, log: str = "") -> Any:
    engine = {"engines": {"vllm": {"interpreter": "/venv/bin/python", "version": version, "error": None,
                                   "names": {"VLLM_ATTENTION_BACKEND": named}}},
              "settings": {"VLLM_ATTENTION_BACKEND": ["server vllm serve"]}, "interpreters": {}, "environments_error": None}
    facts: dict[str, Any] = {"engine": engine,
                             "processes": processes(server(*VLLM, env={"VLLM_ATTENTION_BACKEND": "FLASHINFER"}))}
    if log:
        facts["logs"] = logs(log)
    return make_snapshot(**facts)


def test_a_variable_the_source_never_names() -> None:
    [finding] = found("engine-setting-ignored", snapshot("0.26.0", False))
    assert finding.severity is Severity.medium and not finding.observed
    assert finding.why == ("VLLM_ATTENTION_BACKEND=FLASHINFER is set (server vllm serve) but vLLM 0.26.0 does not read "
                           "it (its source never names it): the default attention backend now runs")
    assert finding.subjects == (("env", "VLLM_ATTENTION_BACKEND"), ("package", "vllm"))


def test_a_release_that_removed_it_even_where_a_message_still_names_it() -> None:
    [finding] = found("engine-setting-ignored", snapshot("0.16.0", True))
    assert "(vLLM 0.15 removed it)" in finding.why
    assert found("engine-setting-ignored", snapshot("0.14.1", True)) == []  # deprecated, still read
    assert found("engine-setting-ignored", snapshot("0.14.1", None)) == []  # not reached: unknown


def test_the_log_showing_another_backend_makes_it_observed() -> None:
    log = ("INFO 07-29 10:00:00 [api_server.py:1839] vLLM API server version 0.26.0\n"
           "INFO 07-29 10:00:05 [cuda.py:280] Using AttentionBackendEnum.FLASH_ATTN backend.\n")
    [finding] = found("engine-setting-ignored", snapshot("0.26.0", False, log))
    assert finding.observed and finding.why.endswith("; its log shows the AttentionBackendEnum.FLASH_ATTN backend")
