"""The canary's diff rules: a changed answer is a high symptom, a near tie or a noisy server is
context, a failed canary an error with its reason; and a hostile answer stays data in every sink.
The answers are real llama-cpp-python ones (tests/fixtures/canary), edited as a drift would."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from driftwatch.diff.change import Change
from driftwatch.explain.rank import rank_changes
from driftwatch.explain.symptoms import relate
from tests.diff.builders import make_snapshot
from driftwatch.canary.parse import parse_run
from driftwatch.cron.textfile import write_textfile
from driftwatch.diff import Severity
from driftwatch.explain import DiffResult, diff_snapshots
from driftwatch.diff.canary import changed_prompts
from driftwatch.report.diff import render_markdown
from driftwatch.report.html.diff import render_diff
from driftwatch.report.safe import chat_text
from tests.canary.test_classify import flipped

CAPTURES = Path(__file__).parent.parent / "fixtures" / "canary" / "llama-cpp-python"
KEY = "llama_cpp.server"


def answer(name: str, kind: str, rate: float = 50.0) -> dict[str, Any]:
    run = parse_run(json.loads((CAPTURES / name).read_text()), kind)
    return run | {"volatile": {"latency_s": 0.2, "tokens_per_s": rate}}


def server(**prompts: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "url": "http://127.0.0.1:8000", "source": "command line", "engine": "llama.cpp", "dialect": "llama.cpp",
        "state": "ok", "error": None, "model": "smollm2", "models": ["smollm2"], "version": None,
        "system_fingerprint": None, "server_info": None,
        "prompts": {name: {"kind": "chat", "spec_sha256": name, "runs": runs, "error": None}
                    for name, runs in prompts.items()},
    }


def canary(entry: dict[str, Any]) -> dict[str, Any]:
    return {"servers": {KEY: entry}, "settings": {"max_tokens": 32}, "near_tie_gap": 0.5}


def diff(old: dict[str, Any], new: dict[str, Any]) -> DiffResult:
    return diff_snapshots(make_snapshot(canary=canary(old)), make_snapshot(minutes=60, canary=canary(new)))


@pytest.fixture
def capital() -> dict[str, Any]:
    return answer("chat_capital.json", "chat")


@pytest.fixture
def primes() -> dict[str, Any]:
    return answer("completion_primes.json", "completion")


def test_unchanged_answers_are_no_drift(capital: dict[str, Any], primes: dict[str, Any]) -> None:
    base = server(capital=[capital, capital], primes=[primes, primes])
    result = diff(base, copy.deepcopy(base))
    assert not result.drift and result.changes == []


def test_a_changed_answer_heads_the_diff_as_a_high_symptom(capital: dict[str, Any], primes: dict[str, Any]) -> None:
    now = flipped(capital, 5, " Lyon", -0.4, -1.5)
    result = diff(server(capital=[capital, capital], primes=[primes, primes]),
                  server(capital=[now, now], primes=[primes, primes]))
    [change] = result.drift_changes
    assert change.category == "canary" and change.severity is Severity.high and change.item == KEY
    assert change.explanation.startswith(
        "greedy output of 1/2 canary prompts changed on llama_cpp.server (first divergence at token 5 of "
        "'capital', ' Paris' → ' Lyon'")
    assert change.new == {"kind": "changed", "changed": 1, "of": 2, "prompts": ["capital"]}
    # A symptom: it heads the report, and with nothing else recorded, nothing explains it.
    assert change.symptom and result.summary["symptom"] == change.explanation
    assert result.summary["most_likely_cause"] is None
    assert changed_prompts(result.changes) == 1


def test_a_near_tie_flip_is_context_and_the_check_stays_quiet(primes: dict[str, Any]) -> None:
    now = flipped(primes, 2, " and", -0.55, -0.90)
    result = diff(server(primes=[primes, primes]), server(primes=[now, now]))
    assert not result.drift and result.summary["total"] == 0
    [change] = result.context_changes
    assert "near-tie flip on 1/1 canary prompts" in change.explanation and "not drift" in change.explanation
    assert changed_prompts(result.changes) == 0


def test_a_moved_prompt_is_the_template_symptom(capital: dict[str, Any]) -> None:
    now = copy.deepcopy(capital) | {"prompt_tokens": 20}
    [change] = diff(server(capital=[capital]), server(capital=[now])).drift_changes
    assert change.severity is Severity.high and change.item == f"{KEY} prompt tokens"
    assert "prompt tokens moved on 1/1 canary prompts" in change.explanation and "20 tokens (was 42)" in change.explanation


def test_a_noisy_server_is_context_with_the_deterministic_mode_advice(primes: dict[str, Any]) -> None:
    other = flipped(primes, 9, " and", -0.5, -1.0)
    result = diff(server(primes=[primes, other]), server(primes=[other, primes]))
    assert not result.drift
    [change] = result.context_changes
    assert "is noisy" in change.explanation and "--enable-deterministic-inference" in change.explanation
    assert "VLLM_BATCH_INVARIANT=1" in change.explanation


@pytest.mark.parametrize(("state", "error", "says"), [
    ("not_ready", "/health answers 503: the server is up but not ready (still loading?)", "not ready"),
    ("error", "connection refused: nothing listens on 127.0.0.1:8000", "failed"),
])
def test_a_canary_that_could_not_ask_is_an_error_never_a_changed_answer(
    capital: dict[str, Any], state: str, error: str, says: str
) -> None:
    broken = server() | {"state": state, "error": error, "prompts": {}}
    result = diff(server(capital=[capital]), broken)
    [change] = result.changes
    assert change.severity is Severity.medium and "changed" not in change.explanation
    assert change.explanation.startswith(f"canary on {KEY} {says}: ") and error in change.explanation
    assert changed_prompts(result.changes) == 0


def test_slower_answers_beyond_the_spread_are_a_separate_lower_finding(capital: dict[str, Any]) -> None:
    slow = [copy.deepcopy(capital) | {"volatile": {"tokens_per_s": 20.0}} for _ in range(2)]
    [change] = diff(server(capital=[capital, capital]), server(capital=slow)).drift_changes
    assert change.severity is Severity.low and "50.0 → 20.0 tokens/s" in change.explanation


def test_what_the_server_says_of_itself_is_a_change_of_its_own_kind(capital: dict[str, Any]) -> None:
    old = server(capital=[capital]) | {"version": "0.5.3", "server_info": {"attention_backend": "flashinfer"}}
    new = copy.deepcopy(old) | {"version": "0.5.4", "server_info": {"attention_backend": "fa3"}}
    changes = {c.item: c for c in diff(old, new).drift_changes}
    assert changes[f"{KEY} version"].category == "process"
    assert changes[f"{KEY} attention_backend"].category == "launch-arg"
    assert "flashinfer → fa3" in changes[f"{KEY} attention_backend"].explanation


def test_a_hostile_answer_is_data_in_the_terminal_markdown_html_and_chat(capital: dict[str, Any]) -> None:
    hostile = "<!channel> \x1b]0;pwned\x07 <script>alert(1)</script> **bold** |"
    now = flipped(capital, 5, hostile, -0.4, -1.5)
    result = diff(server(capital=[capital]), server(capital=[now]))
    markdown = render_markdown(result)
    assert "\x1b" not in markdown and "\x07" not in markdown
    assert "\\<script>" in markdown and not re.search(r"(?<!\\)<", markdown)  # each "<" escaped: text, not HTML
    page = render_diff(result)
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;" in page
    assert "<!channel>" not in chat_text(result.summary["most_likely_cause"])


def test_the_textfile_counts_changed_prompts_only_where_the_canary_ran(tmp_path: Path, capital: dict[str, Any]) -> None:
    now = flipped(capital, 5, " Lyon", -0.4, -1.5)
    snapshot = make_snapshot(minutes=60, canary=canary(server(capital=[now])))
    result = diff(server(capital=[capital]), server(capital=[now]))
    text = write_textfile(tmp_path, "gpu01", snapshot=snapshot, result=result).read_text()
    assert 'driftwatch_canary_changed{host="gpu01"} 1.0' in text
    plain = write_textfile(tmp_path, "gpu02", snapshot=make_snapshot(), result=result).read_text()
    assert "driftwatch_canary_changed{" not in plain


def test_answers_asked_in_another_dialect_are_not_compared(capital: dict[str, Any]) -> None:
    # Without the engine's own parameters (llama.cpp's repeat_penalty 1.1 by default) the same
    # server answers differently: that is not the server changing.
    now = flipped(capital, 5, " Lyon", -0.4, -1.5)
    result = diff(server(capital=[capital]) | {"dialect": "openai"}, server(capital=[now]))
    assert not result.drift
    [change] = result.context_changes
    assert "another dialect (openai → llama.cpp)" in change.explanation


def test_a_changed_answer_pulls_the_changes_that_can_change_outputs_above_others(
    capital: dict[str, Any], primes: dict[str, Any]
) -> None:
    now = flipped(capital, 5, " Lyon", -0.4, -1.5)
    result = diff(server(capital=[capital, capital], primes=[primes, primes]),
                  server(capital=[now, now], primes=[primes, primes]))
    [symptom] = result.drift_changes
    env = Change("env", "NCCL_DEBUG", "INFO", "WARN", Severity.high, "NCCL_DEBUG INFO → WARN (server)")
    kernel = Change("package", "flashinfer-python", "0.5.3", "0.5.4", Severity.medium, "flashinfer 0.5.3 → 0.5.4")
    ranked = rank_changes(relate([env, kernel, symptom], make_snapshot()))
    assert [c.item for c in ranked if not c.symptom] == ["flashinfer-python", "NCCL_DEBUG"]
