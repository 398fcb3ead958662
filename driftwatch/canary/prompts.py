"""What the canary sends: greedy requests with every sampling parameter explicit.

An engine fills a parameter the request leaves out from its own defaults, or from the
model's ``generation_config.json`` (vLLM does since #15241), so a request that left
``top_k`` out would change its answer when that file or that engine default changed. Each
request therefore says temperature 0, top_p 1, top_k off, min_p 0, no penalties, a fixed
seed, ``max_tokens`` and the top-N logprobs, in the dialect of the engine that serves it
(``top_k: -1`` is "off" for SGLang and vLLM, ``0`` for llama.cpp; ``return_token_ids`` is
asked of SGLang and vLLM, which return the token ids of prompt and answer).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from driftwatch.canary.settings import CanaryPrompt, CanarySettings

CHAT_PATH, COMPLETION_PATH = "/v1/chat/completions", "/v1/completions"
# Dialect by /v1/models' owned_by when the command line did not say which engine it is
# (llama-cpp-python's server says "me", llama.cpp's own "llamacpp").
OWNERS = {"vllm": "vllm", "sglang": "sglang", "llamacpp": "llama.cpp", "me": "llama.cpp"}
# Engine information, newer path first (SGLang deprecated /get_server_info for /server_info).
INFO_PATHS = {"sglang": ["/server_info", "/get_server_info"], "vllm": ["/version"]}
_OFF = {"sglang": -1, "vllm": -1, "llama.cpp": 0}


def base_body(prompt: CanaryPrompt, settings: CanarySettings) -> dict[str, Any]:
    """The OpenAI parameters every compatible server knows, all explicit."""
    body: dict[str, Any] = {
        "max_tokens": settings.max_tokens,
        "temperature": 0.0,
        "top_p": 1.0,
        "n": 1,
        "seed": settings.seed,
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
        "stream": False,
    }
    if prompt.messages is not None:
        body["messages"] = [m.model_dump() for m in prompt.messages]
        if settings.top_logprobs:
            body.update(logprobs=True, top_logprobs=settings.top_logprobs)
    else:
        body.update(prompt=prompt.prompt, echo=False)
        if settings.top_logprobs:
            body["logprobs"] = settings.top_logprobs
    return body


def extras(dialect: str) -> dict[str, Any]:
    """The engine's own sampling parameters, set to "off" (same for chat and completions)."""
    if dialect == "llama.cpp":
        return {"top_k": 0, "min_p": 0.0, "repeat_penalty": 1.0, "mirostat_mode": 0}
    if dialect in ("sglang", "vllm"):
        return {"top_k": _OFF[dialect], "min_p": 0.0, "repetition_penalty": 1.0, "return_token_ids": True}
    return {}


def prompt_digest(prompt: CanaryPrompt, settings: CanarySettings) -> str:
    """What the answer depends on besides the server: the prompt and the request's settings.
    Two snapshots whose digests differ asked different questions: not compared."""
    spec = {"prompt": prompt.model_dump(exclude={"name"}), **request_settings(settings)}
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


def request_settings(settings: CanarySettings) -> dict[str, Any]:
    return {"max_tokens": settings.max_tokens, "seed": settings.seed, "top_logprobs": settings.top_logprobs,
            "temperature": 0.0, "top_p": 1.0, "top_k": "off", "min_p": 0.0, "penalties": "none"}


def script_request(settings: CanarySettings, endpoints: list[dict[str, Any]], deadline: float) -> dict[str, Any]:
    """The canary script's stdin (the endpoints carry the API key, when there is one)."""
    prompts = [
        {"name": p.name, "kind": p.kind, "path": CHAT_PATH if p.kind == "chat" else COMPLETION_PATH,
         "body": base_body(p, settings)}
        for p in settings.prompts
    ]
    dialects = ("sglang", "vllm", "llama.cpp")
    return {
        "endpoints": endpoints,
        "prompts": prompts,
        "repeats": settings.repeats,
        "extras": {d: {"chat": extras(d), "completion": extras(d)} for d in dialects},
        "owners": OWNERS,
        "info_paths": INFO_PATHS,
        "deadline": deadline,
        "connect_timeout": settings.connect_timeout,
        "request_timeout": settings.request_timeout,
        "max_bytes": settings.max_response_bytes,
    }
