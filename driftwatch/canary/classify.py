"""Two canaries' answers to one prompt: what kind of difference it is. Pure.

* identical — the same tokens (ids where both sides have them, else token strings, else the
  text's digest);
* near-tie flip — at the first divergence each side's token is among the other's top
  alternatives and their logprobs are within ``gap`` nats on both sides (vLLM's own
  ``check_logprobs_close`` rule, with the gap bound): a different reduction order tipped a
  tie. Context, never drift;
* template/tokenizer changed — the prompt's token count or its first token ids moved: the
  chat template, the system prompt or the tokenizer is not the same, whatever the model does;
* changed — anything else: where it first diverged, both continuations, how the old token's
  logprob moved;
* noisy — the repeats of one canary already disagree: only a change beyond that noise (an
  earlier divergence than the server's own) counts as changed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

IDENTICAL, NEAR_TIE, CHANGED, TEMPLATE, NOISY, ERROR, NOT_COMPARED = (
    "identical", "near-tie", "changed", "template", "noisy", "error", "not-compared",
)
DRIFT_KINDS = frozenset({CHANGED, TEMPLATE})
CONTINUATION = 6  # tokens of each continuation quoted


@dataclass(frozen=True)
class Verdict:
    prompt: str
    kind: str
    detail: str = ""
    position: int | None = None  # first divergence, 0-based token index
    old_token: str | None = None
    new_token: str | None = None
    old_text: str = ""  # the continuations from the divergence on
    new_text: str = ""
    shift: float | None = None  # how the old token's logprob moved at the divergence
    beyond_noise: bool = False

    @property
    def drift(self) -> bool:
        return self.kind in DRIFT_KINDS


def runs_of(prompt: Any) -> list[dict[str, Any]]:
    runs = prompt.get("runs") if isinstance(prompt, dict) else None
    return [r for r in runs or [] if isinstance(r, dict)]


def sequence(run: dict[str, Any], other: dict[str, Any] | None = None) -> tuple[Any, ...]:
    """What "the same answer" means between ``run`` and ``other``: token ids when both have
    them, token strings when both have them, else the text's digest."""
    for key in ("token_ids", "tokens"):
        if run.get(key) is not None and (other is None or other.get(key) is not None):
            return tuple(run[key])
    return (run.get("text_sha256"),)


def first_divergence(a: Sequence[Any], b: Sequence[Any]) -> int | None:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return sequence(a, b) == sequence(b, a) and a.get("text_sha256") == b.get("text_sha256")


def noise(runs: list[dict[str, Any]]) -> int | None:
    """Where the repeats of one canary first disagree (None: they agree)."""
    found = [_divergence(runs[0], r) for r in runs[1:] if not same(runs[0], r)]
    return min(found) if found else None


def classify(name: str, old: Any, new: Any, gap: float) -> Verdict:
    """The verdict for prompt ``name`` between the baseline's record and the new one."""
    for side, record in (("baseline", old), ("now", new)):
        error = record.get("error") if isinstance(record, dict) else "no record"
        if error:
            return Verdict(name, ERROR, f"{side}: {error}")
    if old.get("spec_sha256") != new.get("spec_sha256"):
        return Verdict(name, NOT_COMPARED, "the prompt or the request settings differ")
    old_runs, new_runs = runs_of(old), runs_of(new)
    if not old_runs or not new_runs:
        return Verdict(name, ERROR, "no answer recorded")
    template = _template(old_runs[0], new_runs[0])
    if template:
        return Verdict(name, TEMPLATE, template)
    noisy = [n for n in (noise(old_runs), noise(new_runs)) if n is not None]
    if any(same(o, n) for o in old_runs for n in new_runs):
        if noisy:
            return Verdict(name, NOISY, "the server's repeats disagree, and this answer is one it already gave")
        return Verdict(name, IDENTICAL)
    a, b = old_runs[0], new_runs[0]
    position = _divergence(a, b)
    if noisy and position >= min(noisy):
        return Verdict(name, NOISY, f"diverges at token {position}, no earlier than the server's own repeats "
                                    f"(token {min(noisy)})", position=position)
    verdict = _diverged(name, a, b, position, gap)
    if noisy and verdict.kind == CHANGED:
        return Verdict(**{**verdict.__dict__, "beyond_noise": True})
    return verdict


def _divergence(a: dict[str, Any], b: dict[str, Any]) -> int:
    position = first_divergence(sequence(a, b), sequence(b, a))
    return 0 if position is None else position  # same tokens, different text: the text differs from the start


def _template(old: dict[str, Any], new: dict[str, Any]) -> str:
    o, n = old.get("prompt_tokens"), new.get("prompt_tokens")
    if isinstance(o, int) and isinstance(n, int) and o != n:
        return f"the prompt is {n} tokens (was {o}): the chat template, system prompt or tokenizer changed"
    ids_o, ids_n = old.get("prompt_token_ids"), new.get("prompt_token_ids")
    if ids_o is not None and ids_n is not None and ids_o != ids_n:
        at = first_divergence(ids_o, ids_n)
        return f"the prompt's token ids moved at position {at}: the chat template or tokenizer changed"
    if old.get("prompt_ids_sha256") and new.get("prompt_ids_sha256") and \
            old["prompt_ids_sha256"] != new["prompt_ids_sha256"]:
        return "the prompt's token ids differ: the chat template or tokenizer changed"
    return ""


def _diverged(name: str, a: dict[str, Any], b: dict[str, Any], position: int, gap: float) -> Verdict:
    old_tokens, new_tokens = a.get("tokens") or [], b.get("tokens") or []
    old_token = old_tokens[position] if position < len(old_tokens) else None
    new_token = new_tokens[position] if position < len(new_tokens) else None
    old_text = "".join(old_tokens[position:position + CONTINUATION]) if old_tokens else (a.get("text") or "")[:60]
    new_text = "".join(new_tokens[position:position + CONTINUATION]) if new_tokens else (b.get("text") or "")[:60]
    shift = _shift(a, b, position, old_token)
    tie = _near_tie(a, b, position, old_token, new_token, gap)
    base = dict(prompt=name, position=position, old_token=old_token, new_token=new_token, old_text=old_text,
                new_text=new_text, shift=shift)
    if tie is not None:
        return Verdict(kind=NEAR_TIE, detail=f"top two within {tie:.2f} nats at token {position}", **base)
    why = "" if a.get("top") and b.get("top") else " (no logprobs to tell a near-tie)"
    return Verdict(kind=CHANGED, detail=f"first divergence at token {position}{why}", **base)


def _at(run: dict[str, Any], position: int) -> dict[str, float]:
    top = run.get("top") or []
    return top[position] if position < len(top) and isinstance(top[position], dict) else {}


def _own(run: dict[str, Any], position: int) -> float | None:
    values = run.get("logprobs") or []
    return values[position] if position < len(values) else None


def _near_tie(a: dict[str, Any], b: dict[str, Any], position: int, old_token: str | None, new_token: str | None,
              gap: float) -> float | None:
    """The larger of the two sides' gaps when it is a near tie, else None."""
    if old_token is None or new_token is None or old_token == new_token:
        return None
    top_a, top_b = _at(a, position), _at(b, position)
    if new_token not in top_a or old_token not in top_b:
        return None
    mine_a = _own(a, position)
    mine_b = _own(b, position)
    mine_a = top_a.get(old_token, mine_a) if mine_a is None else mine_a
    mine_b = top_b.get(new_token, mine_b) if mine_b is None else mine_b
    if mine_a is None or mine_b is None:
        return None
    widest = max(mine_a - top_a[new_token], mine_b - top_b[old_token])
    return widest if widest <= gap else None


def _shift(a: dict[str, Any], b: dict[str, Any], position: int, old_token: str | None) -> float | None:
    before = _own(a, position)
    after = _at(b, position).get(old_token) if old_token is not None else None
    return None if before is None or after is None else round(after - before, 3)
