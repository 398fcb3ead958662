"""Classifying two canaries' answers to one prompt, from real llama-cpp-python answers.

The baseline is a real greedy answer of SmolLM2-135M (tests/fixtures/canary/llama-cpp-python);
each "now" side changes it the way a real drift would: the second most likely token wins
where the two were close (a near tie), or where they were far apart (a real change), the
prompt gets longer (another template), or the server's own repeats disagree.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from driftwatch.canary import classify as c
from driftwatch.canary.parse import parse_run

CAPTURES = Path(__file__).parent.parent / "fixtures" / "canary" / "llama-cpp-python"


def run(name: str, kind: str) -> dict[str, Any]:
    return parse_run(json.loads((CAPTURES / name).read_text()), kind)


def record(*runs: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "completion", "spec_sha256": "s", "runs": list(runs), "error": None}


def flipped(base: dict[str, Any], at: int, token: str, lp: float, other_lp: float) -> dict[str, Any]:
    """``base`` with ``token`` chosen at ``at`` (logprob ``lp``), the old token now ``other_lp``."""
    out = copy.deepcopy(base)
    old = out["tokens"][at]
    out["tokens"][at] = token
    out["logprobs"][at] = lp
    out["top"][at] = {token: lp, old: other_lp}
    out["text_sha256"] = "changed"
    return out


@pytest.fixture
def primes() -> dict[str, Any]:
    return run("completion_primes.json", "completion")


@pytest.fixture
def capital() -> dict[str, Any]:
    return run("chat_capital.json", "chat")


def test_the_same_answer_twice_is_identical(primes: dict[str, Any]) -> None:
    verdict = c.classify("primes", record(primes, primes), record(primes, copy.deepcopy(primes)), gap=0.5)
    assert verdict.kind == c.IDENTICAL and not verdict.drift


def test_close_tokens_swapping_is_a_near_tie_not_drift(primes: dict[str, Any]) -> None:
    # The real answer: ',' at -0.57 with ' and' at -0.94 (0.37 nats apart) at token 2.
    now = flipped(primes, 2, " and", -0.55, -0.90)
    verdict = c.classify("primes", record(primes, primes), record(now, now), gap=0.5)
    assert verdict.kind == c.NEAR_TIE and not verdict.drift
    assert (verdict.position, verdict.old_token, verdict.new_token) == (2, ",", " and")


def test_far_apart_tokens_swapping_is_a_change_with_where_and_how(capital: dict[str, Any]) -> None:
    # ' Paris' at -0.02, ' London' at -5.74: no tie.
    now = flipped(capital, 5, " London", -0.5, -1.2)
    verdict = c.classify("capital", record(capital, capital), record(now, now), gap=0.5)
    assert verdict.kind == c.CHANGED and verdict.drift
    assert (verdict.position, verdict.old_token, verdict.new_token) == (5, " Paris", " London")
    assert verdict.old_text.startswith(" Paris") and verdict.new_text.startswith(" London")
    assert verdict.shift == pytest.approx(-1.2 - capital["logprobs"][5], abs=1e-3)


def test_the_same_swap_beyond_the_gap_is_a_change(primes: dict[str, Any]) -> None:
    now = flipped(primes, 2, " and", -0.55, -0.90)
    assert c.classify("primes", record(primes), record(now), gap=0.2).kind == c.CHANGED


def test_a_longer_prompt_is_a_template_or_tokenizer_change_first(capital: dict[str, Any]) -> None:
    now = flipped(capital, 0, "Paris", -0.3, -1.0)
    now["prompt_tokens"] = 20  # no default system prompt any more: 42 → 20
    verdict = c.classify("capital", record(capital), record(now), gap=0.5)
    assert verdict.kind == c.TEMPLATE and verdict.drift and "20 tokens (was 42)" in verdict.detail


def test_without_logprobs_a_difference_is_a_change_that_says_so(capital: dict[str, Any]) -> None:
    old, now = copy.deepcopy(capital), flipped(capital, 5, " London", -0.5, -1.2)
    for side in (old, now):
        side["top"] = side["logprobs"] = None
    verdict = c.classify("capital", record(old), record(now), gap=0.5)
    assert verdict.kind == c.CHANGED and "no logprobs to tell a near-tie" in verdict.detail


def test_a_noisy_server_giving_one_of_its_own_answers_is_noise(primes: dict[str, Any]) -> None:
    other = flipped(primes, 9, " and", -0.5, -1.0)  # repeats of one run already differ at token 9
    verdict = c.classify("primes", record(primes, other), record(other, primes), gap=0.5)
    assert verdict.kind == c.NOISY and not verdict.drift


def test_a_noisy_server_diverging_later_than_its_own_noise_is_noise(primes: dict[str, Any]) -> None:
    early = flipped(primes, 3, "3", -0.5, -1.0)
    late = flipped(primes, 10, "6", -3.0, -0.5)
    verdict = c.classify("primes", record(primes, early), record(late, late), gap=0.5)
    assert verdict.kind == c.NOISY


def test_a_noisy_server_diverging_before_its_own_noise_changed(primes: dict[str, Any]) -> None:
    noisy = flipped(primes, 9, " and", -0.5, -1.0)
    now = flipped(primes, 1, "1", -0.3, -3.0)
    verdict = c.classify("primes", record(primes, noisy), record(now, now), gap=0.5)
    assert verdict.kind == c.CHANGED and verdict.beyond_noise


def test_an_error_on_either_side_is_an_error_never_a_change(primes: dict[str, Any]) -> None:
    broken = {"kind": "completion", "spec_sha256": "s", "runs": [], "error": "POST /v1/completions: HTTP 500: 4226"}
    for old, new in ((record(primes), broken), (broken, record(primes))):
        verdict = c.classify("primes", old, new, gap=0.5)
        assert verdict.kind == c.ERROR and "HTTP 500" in verdict.detail and not verdict.drift


def test_another_question_is_not_compared(primes: dict[str, Any]) -> None:
    other = {**record(primes), "spec_sha256": "t"}
    assert c.classify("primes", record(primes), other, gap=0.5).kind == c.NOT_COMPARED


def test_token_ids_decide_when_both_sides_have_them(primes: dict[str, Any]) -> None:
    a, b = copy.deepcopy(primes), copy.deepcopy(primes)
    a["token_ids"], b["token_ids"] = [1, 2, 3], [1, 2, 4]
    verdict = c.classify("primes", record(a), record(b), gap=0.5)
    assert verdict.kind == c.CHANGED and verdict.position == 2
