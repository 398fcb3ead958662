"""The canary script's raw answers into facts: pure, driven by real captures in tests.

Every answer is an HTTP exchange the script bounded (status, content type, body up to the
cap, seconds). Whatever is not a well-formed OpenAI answer becomes an error sentence that
says what came back (HTTP 500 and the server's message, an HTML page, invalid JSON, a body
over the cap), never an empty answer: a broken server must never read as "output changed".
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

MAX_TEXT = 4000  # characters of an answer kept (its digest covers all of it)
MAX_TOKENS = 256
MAX_TOP = 20
MAX_PROMPT_IDS = 64  # first prompt token ids kept; the count and a digest cover all
MAX_MESSAGE = 200  # characters of a server's error message
# Effective settings SGLang reports that decide what it computes: kernels and attention
# backends, dtypes and quantization, determinism, sampling defaults, the model and template.
SERVER_INFO_KEYS = (
    "version", "model_path", "tokenizer_path", "served_model_name", "revision", "weight_version", "dtype",
    "kv_cache_dtype", "quantization", "attention_backend", "decode_attention_backend", "prefill_attention_backend",
    "sampling_backend", "moe_runner_backend", "fp8_gemm_runner_backend", "enable_deterministic_inference",
    "sampling_defaults", "preferred_sampling_params", "chat_template", "tp_size", "disable_cuda_graph",
    "enable_torch_compile", "disable_radix_cache", "speculative_algorithm", "triton_attention_reduce_in_fp32",
)  # fmt: skip


class AnswerError(Exception):
    """The server's answer is not what an OpenAI-compatible server sends."""


def document(answer: dict[str, Any], what: str) -> Any:
    """The JSON an answer carries, or AnswerError saying what came back instead."""
    if answer.get("error"):
        status = f" (HTTP {answer['status']})" if answer.get("status") else ""
        raise AnswerError(f"{what}: {answer['error']}{status}")
    status = answer.get("status")
    body = answer.get("body") or ""
    try:
        parsed = json.loads(body)
    except ValueError as exc:
        parsed = None
        if status == 200:
            kind = (answer.get("type") or "no content type").split(";")[0]
            if "html" in kind or body.lstrip()[:1] == "<":
                raise AnswerError(f"{what}: answered an HTML page ({kind}), not JSON: is this an OpenAI-compatible "
                                  "API?") from None
            raise AnswerError(f"{what}: invalid JSON ({exc.msg} at character {exc.pos})") from None
    if status != 200:
        message = server_message(parsed) or _first_line(body)
        raise AnswerError(f"{what}: HTTP {status}" + (f": {message}" if message else ""))
    return parsed


def server_message(parsed: Any) -> str:
    """The message of an error document, as OpenAI/vLLM, SGLang, FastAPI or llama.cpp word it."""
    if not isinstance(parsed, dict):
        return ""
    error = parsed.get("error")
    for candidate in (error.get("message") if isinstance(error, dict) else error, parsed.get("message"),
                      parsed.get("detail")):
        if isinstance(candidate, str) and candidate:
            return candidate[:MAX_MESSAGE]
        if candidate:  # FastAPI's validation errors: a list of dicts
            return json.dumps(candidate)[:MAX_MESSAGE]
    return ""


def parse_models(parsed: Any) -> dict[str, Any]:
    """``/v1/models``: the served ids and what the first one says of itself."""
    data = parsed.get("data") if isinstance(parsed, dict) else None
    if not isinstance(data, list) or not data:
        raise AnswerError("/v1/models: no model listed")
    cards = [card for card in data if isinstance(card, dict) and isinstance(card.get("id"), str)]
    if not cards:
        raise AnswerError("/v1/models: no model listed")
    first = cards[0]
    return {
        "model": first["id"],
        "models": [card["id"] for card in cards[:16]],
        "owned_by": first.get("owned_by") if isinstance(first.get("owned_by"), str) else None,
        "root": first.get("root") if isinstance(first.get("root"), str) else None,
        "max_model_len": first.get("max_model_len") if isinstance(first.get("max_model_len"), int) else None,
    }


def parse_info(path: str, parsed: Any) -> dict[str, Any]:
    """SGLang's ``/server_info`` (a bounded subset) or vLLM's ``/version``."""
    if not isinstance(parsed, dict):
        return {}
    if path == "/version":
        version = parsed.get("version")
        return {"version": version} if isinstance(version, str) else {}
    info = {key: parsed[key] for key in SERVER_INFO_KEYS if key in parsed and _small(parsed[key])}
    status = parsed.get("status")
    if isinstance(status, str):
        info["status"] = status
    return info


def parse_run(parsed: Any, kind: str) -> dict[str, Any]:
    """One completion (``kind`` chat or completion) as the facts a comparison needs."""
    choices = parsed.get("choices") if isinstance(parsed, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise AnswerError("no choices in the answer")
    choice = choices[0]
    reasoning = None
    if kind == "chat":
        message = choice.get("message") if isinstance(choice.get("message"), dict) else {}
        text = message.get("content")
        reasoning = message.get("reasoning_content") or message.get("reasoning")
        tokens, logprobs, top = _chat_logprobs(choice.get("logprobs"))
    else:
        text = choice.get("text")
        tokens, logprobs, top = _completion_logprobs(choice.get("logprobs"))
    if text is not None and not isinstance(text, str):
        raise AnswerError("the answer's text is not a string")
    text = text or ""
    reasoning = reasoning if isinstance(reasoning, str) else None
    usage = parsed.get("usage") if isinstance(parsed.get("usage"), dict) else {}
    prompt_ids = choice.get("prompt_token_ids") or parsed.get("prompt_token_ids")
    whole = text if reasoning is None else f"{reasoning}\n\n{text}"
    run = {
        "text": text[:MAX_TEXT],
        "reasoning": reasoning[:MAX_TEXT] if reasoning else None,
        "text_sha256": hashlib.sha256(whole.encode("utf-8", "replace")).hexdigest(),
        "tokens": tokens,
        "token_ids": _ints(choice.get("token_ids"), MAX_TOKENS),
        "logprobs": logprobs,
        "top": top,
        "finish_reason": choice.get("finish_reason") if isinstance(choice.get("finish_reason"), str) else None,
        "prompt_tokens": usage.get("prompt_tokens") if isinstance(usage.get("prompt_tokens"), int) else None,
        "completion_tokens": usage.get("completion_tokens") if isinstance(usage.get("completion_tokens"), int) else None,
        "prompt_token_ids": _ints(prompt_ids, MAX_PROMPT_IDS),
        "prompt_ids_sha256": _ids_digest(prompt_ids),
    }
    fingerprint = parsed.get("system_fingerprint")
    run["system_fingerprint"] = fingerprint if isinstance(fingerprint, str) else None
    return run


def timing(run: dict[str, Any], elapsed: Any) -> dict[str, Any]:
    """Latency and tokens/s of one run: readings, never compared as facts are."""
    seconds = float(elapsed) if isinstance(elapsed, int | float) else None
    count = run.get("completion_tokens")
    if count is None and run.get("tokens"):
        count = len(run["tokens"])
    rate = round(count / seconds, 2) if seconds and count else None
    return {"latency_s": seconds, "tokens_per_s": rate}


def _chat_logprobs(value: Any) -> tuple[list[str] | None, list[float | None] | None, list[dict[str, float]] | None]:
    content = value.get("content") if isinstance(value, dict) else None
    if not isinstance(content, list):
        return None, None, None
    tokens: list[str] = []
    logprobs: list[float | None] = []
    top: list[dict[str, float]] = []
    for entry in content[:MAX_TOKENS]:
        if not isinstance(entry, dict):
            continue
        tokens.append(str(entry.get("token", "")))
        logprobs.append(_float(entry.get("logprob")))
        alternatives = entry.get("top_logprobs") if isinstance(entry.get("top_logprobs"), list) else []
        top.append({str(a.get("token", "")): lp for a in alternatives[:MAX_TOP] if isinstance(a, dict)
                    for lp in [_float(a.get("logprob"))] if lp is not None})
    return tokens, logprobs, top


def _completion_logprobs(value: Any) -> tuple[list[str] | None, list[float | None] | None, list[dict[str, float]] | None]:
    if not isinstance(value, dict) or not isinstance(value.get("tokens"), list):
        return None, None, None
    tokens = [str(t) for t in value["tokens"][:MAX_TOKENS]]
    raw = value.get("token_logprobs") if isinstance(value.get("token_logprobs"), list) else []
    logprobs = [_float(v) for v in raw[:MAX_TOKENS]]
    tops = value.get("top_logprobs") if isinstance(value.get("top_logprobs"), list) else []
    top = []
    for entry in tops[:MAX_TOKENS]:
        items = list(entry.items())[:MAX_TOP] if isinstance(entry, dict) else []
        top.append({str(k): lp for k, v in items for lp in [_float(v)] if lp is not None})
    return tokens, logprobs, top


def _float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if number == number and abs(number) != float("inf") else None  # NaN, inf: not a reading


def _ints(value: Any, limit: int) -> list[int] | None:
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return None
    return value[:limit]


def _ids_digest(value: Any) -> str | None:
    ids = _ints(value, 10**9)
    return None if ids is None else hashlib.sha256(json.dumps(ids).encode()).hexdigest()


def _small(value: Any) -> bool:
    return value is None or isinstance(value, bool | int | float) or (isinstance(value, str) and len(value) <= 4000)


def _first_line(body: str) -> str:
    line = body.strip().splitlines()[0] if body.strip() else ""
    return line[:MAX_MESSAGE]
