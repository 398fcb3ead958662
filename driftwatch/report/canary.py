"""What one canary looked like: per server its state, model and engine, per prompt the answer.

``canary_rows`` is pure (facts in, rows of plain strings out; ``show`` lays them out like its
other sections and the ``canary`` command prints them). The answers are host text: shortened
to one line here, escaped by whoever prints them (``clean``), like every string from a host.
"""

from __future__ import annotations

from typing import Any

from driftwatch.canary.classify import noise, runs_of
from driftwatch.facts.read import as_dict

ANSWER_CHARS = 60
DETERMINISTIC = ("SGLang --enable-deterministic-inference, vLLM VLLM_BATCH_INVARIANT=1 "
                 "would make the canary exact")


def answer_line(run: dict[str, Any]) -> str:
    text = " ".join(str(run.get("text") or run.get("reasoning") or "").split())
    return repr(text[:ANSWER_CHARS] + ("…" if len(text) > ANSWER_CHARS else ""))


def canary_rows(facts: dict[str, Any]) -> tuple[list[list[str]], list[str]]:
    """Rows (server or prompt, state, detail) and notes for one canary probe's facts."""
    rows: list[list[str]] = []
    notes: list[str] = []
    noisy: list[str] = []
    for key, entry in as_dict(facts.get("servers")).items():
        server = as_dict(entry)
        state = str(server.get("state") or "?")
        where = server.get("url") or "?"
        if state != "ok":
            word = "not ready" if state == "not_ready" else "error"
            rows.append([key, word, f"{where}: {server.get('error') or ''}"])
            continue
        engine = server.get("dialect") or server.get("engine") or "openai"
        version = f" {server['version']}" if server.get("version") else ""
        rows.append([key, f"{engine}{version}", f"{server.get('model')} at {where}"])
        for name, prompt in as_dict(server.get("prompts")).items():
            record = as_dict(prompt)
            runs = runs_of(record)
            if record.get("error") or not runs:
                rows.append([f"  {name}", "error", str(record.get("error") or "no answer")])
                continue
            first = runs[0]
            rate = as_dict(first.get("volatile")).get("tokens_per_s")
            speed = f", {rate:g} tok/s" if isinstance(rate, int | float) else ""
            diverged = noise(runs)
            if diverged is not None:
                noisy.append(name)
            repeats = f"repeats differ at token {diverged}" if diverged is not None else f"{len(runs)}× the same"
            rows.append([f"  {name}", f"{repeats}{speed}", answer_line(first)])
    if noisy:
        notes.append(f"the server's own repeats disagree on {', '.join(noisy)}: noisy, only a change beyond that "
                     f"noise is reported; {DETERMINISTIC}")
    return rows, notes


def failed_servers(facts: dict[str, Any]) -> list[str]:
    """``server: reason`` for each server the canary could not ask or compare."""
    found = []
    for key, entry in as_dict(facts.get("servers")).items():
        server = as_dict(entry)
        if server.get("state") != "ok":
            found.append(f"{key}: {server.get('error')}")
        else:
            found += [f"{key} {name}: {as_dict(p).get('error')}" for name, p in as_dict(server.get("prompts")).items()
                      if as_dict(p).get("error")]
    return found
