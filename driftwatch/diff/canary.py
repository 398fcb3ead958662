"""The output canary (the ``canary`` probe): did the server's greedy answers change?

A changed answer is an observed symptom, category ``canary``: one change per server,
``greedy output of 3/8 prompts changed on sglang.launch_server (first divergence at token 5
of 'capital', ' Paris' → ' Lyon')``, its ``new`` a small dict (``changed``, ``of``,
``prompts``) that metrics and the explain stage read. A moved prompt token count is its own
symptom (the chat template, system prompt or tokenizer changed). A near-tie flip and a
server noisy on its own are context, never drift. A canary that could not ask the server
is an error with its reason, never "output changed". Slower answers beyond the run's own
spread are a separate, lower finding. What the server says of itself (its model id,
version, effective settings) are changes of their own kind, ranked like launch settings.
"""

from __future__ import annotations

from statistics import median
from typing import Any

from driftwatch.canary import classify as verdicts
from driftwatch.canary.classify import Verdict, classify, runs_of
from driftwatch.facts import fmt
from driftwatch.diff.change import Change, Severity
from driftwatch.diff.context import DiffContext
from driftwatch.facts.read import Facts, as_dict
from driftwatch.diff.generic import changed_keys

KEYS = frozenset({"servers", "settings", "near_tie_gap"})
CATEGORY = "canary"
DEFAULT_GAP = 0.5  # [canary] near_tie_gap's default: the facts do not carry the config
SLOWER = 0.3  # tokens/s below the baseline's by more than this share (and than the runs' spread)
MAX_NAMED = 3
# What can change a server's greedy answers with no error (explain/ ranks these changes under
# a changed answer): kernels and attention backends, flashinfer/triton and their caches,
# torch and cuBLAS, the model's files and revision, generation config and tokenizer files,
# transformers, quantization and dtype, the engine's version.
OUTPUT_CAUSES = (
    "package:sgl-kernel*", "package:sglang*", "package:vllm*", "package:flashinfer*", "package:triton*",
    "package:torch*", "package:transformers", "package:tokenizers", "package:nvidia-cublas*", "package:nvidia-cudnn*",
    "launch-arg:*backend*", "launch-arg:*quantiz*", "launch-arg:*dtype*", "launch-arg:*model*",
    "file:*", "cuda", "process:* version", "process:* system_fingerprint", "engine", "container",
)
# A moved prompt tokenization: the tokenizer and its template first.
TEMPLATE_CAUSES = (
    "file:*tokenizer*", "file:*chat_template*", "file:*template*", "package:transformers", "package:tokenizers",
    "launch-arg:*template*", "process:* version", "container",
)
DETERMINISTIC = ("deterministic mode (SGLang --enable-deterministic-inference, vLLM VLLM_BATCH_INVARIANT=1) "
                 "would make the canary exact")


def diff_canary(old: Facts, new: Facts, ctx: DiffContext) -> list[Change]:
    recorded = new.get("near_tie_gap")
    gap = float(recorded) if isinstance(recorded, int | float) else DEFAULT_GAP
    old_servers, new_servers = as_dict(old.get("servers")), as_dict(new.get("servers"))
    changes: list[Change] = []
    for key in dict.fromkeys([*new_servers, *old_servers]):
        o, n = as_dict(old_servers.get(key)), as_dict(new_servers.get(key))
        if not o or not n:
            state = "is now asked" if n else "is no longer asked"
            changes.append(Change(CATEGORY, key, bool(o) or None, bool(n) or None, Severity.info,
                                  f"canary: server {key} {state} (a server started or stopped: see processes)"))
            continue
        changes += diff_server(key, o, n, gap)
    return changes


def diff_server(key: str, old: Facts, new: Facts, gap: float = DEFAULT_GAP) -> list[Change]:
    if new.get("state") != "ok":
        word = "not ready" if new.get("state") == "not_ready" else "failed"
        text = f"canary on {key} {word}: {fmt.value(new.get('error'))}; its answers are not compared"
        severity = Severity.medium if old.get("state") == "ok" else Severity.low
        return [Change(CATEGORY, key, old.get("state"), new.get("state"), severity, text)]
    if old.get("state") != "ok":
        text = f"canary on {key} answers again (was {old.get('state')}: {fmt.value(old.get('error'))}); not compared"
        return [Change(CATEGORY, key, old.get("state"), "ok", Severity.info, text, context=True)]
    changes = _about_server(key, old, new)
    if old.get("model") != new.get("model"):
        return changes  # another model answers: its answers differ by nature
    if old.get("dialect") != new.get("dialect"):
        # Another engine's parameters were sent (top_k, penalties): not the same question.
        text = (f"canary on {key} asked in another dialect ({old.get('dialect')} → {new.get('dialect')}): "
                "its answers are not compared")
        return changes + [Change(CATEGORY, f"{key} settings", old.get("dialect"), new.get("dialect"), Severity.info,
                                 text, context=True)]
    found = [classify(name, as_dict(old.get("prompts")).get(name), prompt, gap)
             for name, prompt in as_dict(new.get("prompts")).items() if name in as_dict(old.get("prompts"))]
    changes += symptoms(key, found)
    slower = _slower(key, old, new)
    return changes + ([slower] if slower else [])


def symptoms(key: str, found: list[Verdict]) -> list[Change]:
    """The server's answers, judged prompt by prompt, as changes (``found``: one verdict each)."""
    of = len(found)
    by_kind: dict[str, list[Verdict]] = {}
    for verdict in found:
        by_kind.setdefault(verdict.kind, []).append(verdict)
    changes = []
    template = by_kind.get(verdicts.TEMPLATE, [])
    if template:
        first = template[0]
        text = (f"prompt tokens moved on {len(template)}/{of} canary prompts on {key} ({first.prompt}: {first.detail}); "
                "every answer after it can differ")
        changes.append(Change(CATEGORY, f"{key} prompt tokens", None, _counts(template, of), Severity.high, text,
                              magnitude=len(template) / max(of, 1), symptom=True, pulls=TEMPLATE_CAUSES))
    changed = by_kind.get(verdicts.CHANGED, [])
    if changed:
        beyond = " (beyond the server's own noise)" if any(v.beyond_noise for v in changed) else ""
        text = f"greedy output of {len(changed)}/{of} canary prompts changed on {key}{beyond} ({_first(changed[0])})"
        more = [v.prompt for v in changed[1:MAX_NAMED]]
        text += f"; also {', '.join(more)}" + (" and more" if len(changed) > MAX_NAMED else "") if more else ""
        old_token = changed[0].old_token
        changes.append(Change(CATEGORY, key, old_token, _counts(changed, of), Severity.high, text,
                              magnitude=len(changed) / max(of, 1), symptom=True, pulls=OUTPUT_CAUSES))
    ties = by_kind.get(verdicts.NEAR_TIE, [])
    if ties:
        text = (f"near-tie flip on {len(ties)}/{of} canary prompts on {key} ({_first(ties[0])}; {ties[0].detail}): "
                "two almost equally likely tokens swapped, not drift")
        changes.append(Change(CATEGORY, f"{key} near-tie", None, _counts(ties, of), Severity.info, text,
                              context=True))
    noisy = by_kind.get(verdicts.NOISY, [])
    if noisy:
        text = (f"server {key} is noisy: the repeats of {len(noisy)}/{of} canary prompts disagree within one run, "
                f"so only a change beyond that noise counts; {DETERMINISTIC}")
        changes.append(Change(CATEGORY, f"{key} noise", None, _counts(noisy, of), Severity.info, text, context=True))
    errors = by_kind.get(verdicts.ERROR, [])
    if errors:
        text = f"canary on {key}: {len(errors)}/{of} prompts not compared ({errors[0].prompt}: {errors[0].detail})"
        changes.append(Change(CATEGORY, f"{key} errors", None, _counts(errors, of), Severity.low, text))
    skipped = by_kind.get(verdicts.NOT_COMPARED, [])
    if skipped:
        text = f"canary on {key}: {len(skipped)}/{of} prompts asked differently than the baseline: not compared"
        changes.append(Change(CATEGORY, f"{key} settings", None, _counts(skipped, of), Severity.info, text,
                              context=True))
    return changes


def changed_prompts(changes: list[Change]) -> int:
    """How many canary prompts changed, over the drift of a diff (for the textfile)."""
    total = 0
    for change in changes:
        if change.category == CATEGORY and change.drift and isinstance(change.new, dict):
            if change.new.get("kind") in (verdicts.CHANGED, verdicts.TEMPLATE):
                total += int(change.new.get("changed") or 0)
    return total


def _counts(found: list[Verdict], of: int) -> dict[str, Any]:
    return {"kind": found[0].kind, "changed": len(found), "of": of, "prompts": [v.prompt for v in found]}


def _first(verdict: Verdict) -> str:
    where = f"first divergence at token {verdict.position} of {verdict.prompt!r}"
    if verdict.old_token is not None or verdict.new_token is not None:
        where += f", {_token(verdict.old_token)} → {_token(verdict.new_token)}"
    if verdict.shift is not None:
        where += f", the old token's logprob {verdict.shift:+.2f}"
    if "no logprobs" in verdict.detail:
        where += ", no logprobs to tell a near-tie"
    return where


def _token(token: str | None) -> str:
    """A token as quoted text: its leading space is part of it (' Paris')."""
    return "end of answer" if token is None else repr(token[:40])


def _about_server(key: str, old: Facts, new: Facts) -> list[Change]:
    """What the server says of itself: the model it serves, its version, its settings."""
    changes = []
    if old.get("model") != new.get("model"):
        text = f"{key} serves another model: {fmt.value(old.get('model'))} → {fmt.value(new.get('model'))}"
        changes.append(Change("file", f"{key} model", old.get("model"), new.get("model"), Severity.high, text))
    if old.get("version") != new.get("version") and (old.get("version") or new.get("version")):
        text = f"{key} reports version {fmt.value(old.get('version'))} → {fmt.value(new.get('version'))} (its API)"
        changes.append(Change("process", f"{key} version", old.get("version"), new.get("version"), Severity.high, text))
    if old.get("system_fingerprint") != new.get("system_fingerprint") and new.get("system_fingerprint"):
        text = (f"{key} system_fingerprint {fmt.value(old.get('system_fingerprint'))} → "
                f"{fmt.value(new.get('system_fingerprint'))}: the backend configuration changed")
        changes.append(Change("process", f"{key} system_fingerprint", old.get("system_fingerprint"),
                              new.get("system_fingerprint"), Severity.medium, text))
    info_old, info_new = as_dict(old.get("server_info")), as_dict(new.get("server_info"))
    if info_old and info_new:
        for name in changed_keys(info_old, info_new):
            if name in ("version", "status"):
                continue
            text = (f"{key} effective {name}: {fmt.value(info_old.get(name))} → {fmt.value(info_new.get(name))} "
                    "(as the server reports it)")
            changes.append(Change("launch-arg", f"{key} {name}", info_old.get(name), info_new.get(name),
                                  Severity.medium, text))
    return changes


def _rates(server: Facts) -> list[float]:
    found = []
    for prompt in as_dict(server.get("prompts")).values():
        for run in runs_of(prompt):
            rate = as_dict(run.get("volatile")).get("tokens_per_s")
            if isinstance(rate, int | float) and rate > 0:
                found.append(float(rate))
    return found


def _slower(key: str, old: Facts, new: Facts) -> Change | None:
    before, after = _rates(old), _rates(new)
    if len(before) < 2 or len(after) < 2:
        return None
    base, now = median(before), median(after)
    spread = (max(before) - min(before)) / base if base else 0.0
    if now >= base * (1 - max(SLOWER, spread)):
        return None
    text = (f"canary answers on {key} are slower: {base:.1f} → {now:.1f} tokens/s (median), beyond the baseline "
            f"runs' own spread of ±{spread:.0%}")
    return Change(CATEGORY, f"{key} speed", round(base, 1), round(now, 1), Severity.low, text, symptom=True)
