"""``[canary]``: which prompts, where to send them, how long it may take.

The API key is never in the config: ``api_key_env`` names the environment variable (on the
machine running driftwatch) that holds it, and the key travels only in the request to the
target's canary script, on stdin.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,39}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def check_url(url: str) -> str:
    """``url`` if it is http(s)://HOST:PORT (a path, a query or credentials have no place in
    it), else ValueError saying what to give."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme not in ("http", "https") or not parts.hostname or port is None or parts.username \
            or parts.path.strip("/") not in ("", "v1") or parts.query:
        shown = "the url (with credentials: not shown)" if "@" in url else repr(url[:80])
        raise ValueError(f"{shown} is not http://HOST:PORT as the target sees it, e.g. http://127.0.0.1:30000")
    return url


class Message(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: str = Field(pattern=r"^(system|user|assistant)$")
    content: str = Field(max_length=8000)


class CanaryPrompt(BaseModel):
    """One prompt: chat ``messages`` (the server applies its chat template) or a raw
    completion ``prompt`` (no template: only the tokenizer between it and the model)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    messages: list[Message] | None = None
    prompt: str | None = Field(default=None, max_length=8000)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError(f"{value!r} is not a prompt name (letters, digits, . _ -, at most 40)")
        return value

    @model_validator(mode="after")
    def _one_form(self) -> CanaryPrompt:
        if (self.messages is None) == (self.prompt is None):
            raise ValueError(f"prompt {self.name!r}: give either messages (chat) or prompt (completion)")
        if self.messages is not None and not self.messages:
            raise ValueError(f"prompt {self.name!r}: messages is empty")
        return self

    @property
    def kind(self) -> str:
        return "chat" if self.messages is not None else "completion"


def _chat(name: str, text: str) -> CanaryPrompt:
    return CanaryPrompt(name=name, messages=[Message(role="user", content=text)])


# Short, varied, with one obvious answer each: facts, arithmetic, code, a format, another
# language, and two raw completions (no chat template: a moved answer there is the tokenizer
# or the model, never the template).
DEFAULT_PROMPTS = (
    _chat("capital", "What is the capital of France? Answer in one sentence."),
    _chat("arithmetic", "What is 17 * 23? Answer with the number only."),
    _chat("code", "Write a Python function that returns the factorial of n."),
    _chat("json", 'Return only a JSON object with keys "name" and "age" for Ada, who is 36.'),
    _chat("translate", "Translate into German: The weather is nice today."),
    _chat("reasoning", "All bloops are razzies and all razzies are lazzies. Are all bloops lazzies? Explain briefly."),
    CanaryPrompt(name="primes", prompt="The first ten prime numbers are"),
    CanaryPrompt(name="story", prompt="Once upon a time, in a small village by the sea,"),
)


class CanarySettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # Run the canary in every snapshot/check (else only with --canary or `driftwatch canary`);
    # a host table or [watch] may say `canary = true/false` for itself.
    enabled: bool = False
    # The endpoint as seen from the target (http://127.0.0.1:30000); default: each watched
    # server's --host/--port from its command line.
    url: str | None = None
    api_key_env: str | None = None
    prompts: list[CanaryPrompt] = Field(default_factory=lambda: list(DEFAULT_PROMPTS), min_length=1, max_length=32)
    max_tokens: int = Field(default=32, ge=1, le=256)
    top_logprobs: int = Field(default=5, ge=0, le=20)
    seed: int = Field(default=1234, ge=0, le=2**31 - 1)
    repeats: int = Field(default=2, ge=1, le=3)  # two runs of each prompt measure the server's own noise
    deadline: float = Field(default=20.0, gt=0, le=300, allow_inf_nan=False)  # the whole canary, seconds
    connect_timeout: float = Field(default=3.0, gt=0, le=60, allow_inf_nan=False)
    request_timeout: float = Field(default=10.0, gt=0, le=120, allow_inf_nan=False)
    max_response_bytes: int = Field(default=1024 * 1024, ge=4096, le=64 * 1024 * 1024)
    # A first divergence where each side's token is in the other's top alternatives and the
    # two are within this many nats: a near-tie flip (context), not a changed answer.
    near_tie_gap: float = Field(default=0.5, ge=0, le=10, allow_inf_nan=False)

    @field_validator("url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        return None if value is None else check_url(value)

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, value: str | None) -> str | None:
        if value is not None and not _ENV_NAME.match(value):
            raise ValueError(f"{value[:3]}…: api_key_env names an environment variable (e.g. OPENAI_API_KEY), "
                             "it is not the key itself")
        return value

    @field_validator("prompts")
    @classmethod
    def _unique(cls, value: list[CanaryPrompt]) -> list[CanaryPrompt]:
        names = [p.name for p in value]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"prompt names must be unique: {', '.join(twice)}")
        return value
