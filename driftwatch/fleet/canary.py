"""Fleet facts of the output canary: hosts serving the same model should answer alike.

Each served model is an anchor; each prompt's first answer is compared only among the hosts
that serve that model (``within``), so a host serving another model is not an odd one out
for every prompt, and one whose greedy answers differ from the majority's is. The value is
the answer's start and its digest, so two answers that differ late still differ.
"""

from __future__ import annotations

from typing import Any

from driftwatch.canary.classify import runs_of
from driftwatch.diff.change import Severity
from driftwatch.facts.read import as_dict
from driftwatch.fleet.facts import Area, Fact, FactMap, HostView

ANSWER_CHARS = 40


def answer_value(run: dict[str, Any]) -> str:
    text = " ".join(str(run.get("text") or "").split())
    short = text[:ANSWER_CHARS] + ("…" if len(text) > ANSWER_CHARS else "")
    return f"{short!r} (sha256 {str(run.get('text_sha256') or '')[:10]}, {run.get('prompt_tokens')} prompt tokens)"


def canary_facts(facts: dict[str, Any], view: HostView) -> tuple[FactMap, frozenset[str]]:
    out: FactMap = {}
    for entry in as_dict(facts.get("servers")).values():
        server = as_dict(entry)
        model = server.get("model")
        if server.get("state") != "ok" or not isinstance(model, str):
            continue
        anchor = f"canary[{model}]"
        out[anchor] = Fact("canary", "canary", model, f"canary of model {model}", model, Severity.low)
        for name, prompt in as_dict(server.get("prompts")).items():
            runs = runs_of(prompt)
            value = answer_value(runs[0]) if runs else f"error: {as_dict(prompt).get('error')}"
            out[f"{anchor}.{name}"] = Fact(
                "canary", "canary", model, f"greedy answer of {model} to canary prompt {name!r}", value,
                Severity.high, within=anchor,
            )
    return out, frozenset({"servers", "settings", "near_tie_gap"})


CANARY_AREAS: dict[str, Area] = {"canary": canary_facts}
