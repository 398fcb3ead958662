"""The canary probe against local sockets: every bad input is an error with its reason, and
captured real SGLang/vLLM answers replayed by a local server parse into the facts the diff reads.

The requests go through the real target-side script, run by the local transport exactly as
over SSH (the script asks 127.0.0.1:PORT from where it runs). The real llama-cpp-python
server is tests/probes/test_canary_llama.py.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from driftwatch.canary.settings import CanaryPrompt, CanarySettings, Message
from driftwatch.collect import run_probe
from driftwatch.model import ProbeRecord, ProbeStatus
from driftwatch.probes.base import ProbeContext
from driftwatch.probes.canary import CanaryProbe, server_endpoint
from driftwatch.settings import WatchSettings
from driftwatch.transport.local import LocalTransport
from tests.canary_server import FakeServer, closed_port

CHAT = [CanaryPrompt(name="hello", messages=[Message(role="user", content="Say hello.")]),
        CanaryPrompt(name="capital", messages=[Message(role="user", content="Capital of France?")])]


def canary(url: str, **settings: Any) -> ProbeRecord:
    probe = CanaryProbe(CanarySettings(prompts=CHAT, max_tokens=8, **settings), url=url)
    ctx = ProbeContext(transport=LocalTransport(), watch=WatchSettings(processes=[]), timeout=10)
    return run_probe(probe, ctx)


def server_of(record: ProbeRecord) -> dict[str, Any]:
    assert record.status is ProbeStatus.ok, record.error
    [server] = record.facts["servers"].values()
    return server


@pytest.fixture
def fake(request: pytest.FixtureRequest) -> Iterator[FakeServer]:
    params = request.param if isinstance(request.param, dict) else {"mode": request.param}
    server = FakeServer(**params)
    yield server
    server.close()


def test_nothing_listening_is_an_error_and_no_prompt_is_sent() -> None:
    server = server_of(canary(f"http://127.0.0.1:{closed_port()}"))
    assert server["state"] == "error"
    assert "connection refused: nothing listens on 127.0.0.1" in server["error"]
    assert server["prompts"] == {}


@pytest.mark.parametrize("fake", ["loading"], indirect=True)
def test_a_server_still_loading_is_not_ready_and_gets_no_prompt(fake: FakeServer) -> None:
    server = server_of(canary(fake.url))
    assert server["state"] == "not_ready"
    assert "503" in server["error"] and "not ready" in server["error"]
    assert fake.prompts_sent == []


@pytest.mark.parametrize("fake", [{"mode": "auth", "api_key": "sk-canary-0123456789abcdef"}], indirect=True)
def test_auth_required_without_a_key_says_so(fake: FakeServer) -> None:
    server = server_of(canary(fake.url))
    assert server["state"] == "error"
    assert "401" in server["error"] and "requires an API key" in server["error"]
    assert fake.prompts_sent == []


@pytest.mark.parametrize("fake", [{"mode": "auth", "api_key": "sk-canary-0123456789abcdef"}], indirect=True)
def test_the_key_from_the_named_variable_is_sent_and_never_stored(
    fake: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CANARY_TEST_KEY", "sk-canary-0123456789abcdef")
    record = canary(fake.url, api_key_env="CANARY_TEST_KEY")
    server = server_of(record)
    assert server["state"] == "ok", server["error"]
    assert all(r["headers"]["Authorization"] == "Bearer sk-canary-0123456789abcdef" for r in fake.requests)
    assert "sk-canary-0123456789abcdef" not in record.model_dump_json()


def test_a_named_variable_that_is_not_set_is_an_error_before_anything_is_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CANARY_UNSET_KEY", raising=False)
    fake = FakeServer("replay")
    try:
        server = server_of(canary(fake.url, api_key_env="CANARY_UNSET_KEY"))
    finally:
        fake.close()
    assert server["state"] == "error" and "CANARY_UNSET_KEY, which is not set" in server["error"]
    assert fake.requests == []


@pytest.mark.parametrize("fake", [{"mode": "slow", "delay": 30.0}], indirect=True)
def test_a_slow_server_is_cut_at_the_request_deadline_and_the_whole_canary_stays_bounded(fake: FakeServer) -> None:
    start = time.monotonic()
    server = server_of(canary(fake.url, request_timeout=1.0, deadline=3.0))
    took = time.monotonic() - start
    assert took < 8, took
    errors = [p["error"] for p in server["prompts"].values()]
    assert "no complete answer within 1s" in errors[0]
    assert server["state"] == "error" and server["error"].startswith("no prompt was answered")


@pytest.mark.parametrize(("fake", "says"), [
    ("500", "HTTP 500: 4226"),
    ("html", "answered an HTML page (text/html), not JSON"),
    ("badjson", "invalid JSON"),
    ("huge", "response larger than 1048576 bytes: not read further"),
    ("hangup", "RemoteDisconnected"),
], indirect=["fake"])
def test_a_broken_answer_is_an_error_with_its_reason_never_an_answer(fake: FakeServer, says: str) -> None:
    server = server_of(canary(fake.url))
    prompts = server["prompts"]
    if fake.mode == "hangup":  # even /health gets no answer: the canary stops there
        assert server["state"] == "error" and says in server["error"]
        return
    assert all(p["runs"] == [] for p in prompts.values())
    assert says in prompts["hello"]["error"]
    assert server["state"] == "error"


@pytest.mark.parametrize("fake", [{"mode": "replay", "engine": "sglang"}], indirect=True)
def test_captured_sglang_answers_are_read(fake: FakeServer) -> None:
    server = server_of(canary(fake.url))
    assert server["state"] == "ok" and server["model"] == "qwen/qwen2.5-0.5b-instruct"
    assert server["dialect"] == "sglang"  # told by owned_by: no command line to go by
    assert server["version"] == "0.0.0.dev1+g7bd3dd927"
    assert server["server_info"]["attention_backend"] == "fa3"
    assert server["server_info"]["enable_deterministic_inference"] is False
    run = server["prompts"]["capital"]["runs"][0]
    assert run["text"].startswith("Sure, here are three countries") and run["prompt_tokens"] == 37
    assert run["tokens"] is None  # no logprobs in that capture: kept as unknown, not as "no tokens"
    # Every sampling parameter explicit, in SGLang's dialect.
    body = fake.prompts_sent[0]["body"]
    explicit = {"temperature": 0.0, "top_p": 1.0, "top_k": -1, "min_p": 0.0, "repetition_penalty": 1.0,
                "presence_penalty": 0.0, "frequency_penalty": 0.0, "seed": 1234, "max_tokens": 8, "logprobs": True,
                "top_logprobs": 5, "return_token_ids": True, "n": 1, "stream": False}
    assert explicit.items() <= body.items()
    assert body["model"] == "qwen/qwen2.5-0.5b-instruct"
    assert [r["path"] for r in fake.requests[:4]] == ["/health", "/v1/models", "/server_info", "/get_server_info"]


@pytest.mark.parametrize("fake", [{"mode": "replay", "engine": "vllm"}], indirect=True)
def test_captured_vllm_answers_are_read(fake: FakeServer) -> None:
    server = server_of(canary(fake.url))
    assert server["dialect"] == "vllm" and server["model"] == "meta-llama/Meta-Llama-3.1-8B-Instruct"
    assert server["max_model_len"] == 8096
    assert server["system_fingerprint"] == "vllm-0.22.0-35f181a6"
    run = server["prompts"]["hello"]["runs"][0]
    assert run["token_ids"] is None and run["completion_tokens"] == 270
    assert len(server["prompts"]["hello"]["runs"]) == 2  # asked twice: the server's own noise
    assert fake.prompts_sent[0]["body"]["top_k"] == -1


def test_endpoint_from_the_command_line() -> None:
    sglang = {"kind": "sglang", "argv": [], "args": {"host": "0.0.0.0", "port": 30001, "api_key": "<redacted>"}}
    wanted = {"host": "127.0.0.1", "port": 30001, "scheme": "http", "engine": "sglang", "needs_key": True}
    assert wanted.items() <= server_endpoint("sglang.launch_server", sglang).items()
    vllm = {"kind": "vllm", "argv": [], "args": {"host": "10.0.0.5"}}
    assert server_endpoint("vllm serve", vllm)["host"] == "10.0.0.5"  # bound to one address: asked there
    assert server_endpoint("vllm serve", vllm)["port"] == 8000  # vLLM's default
    llama = {"kind": None, "argv": ["python", "-m", "llama_cpp.server", "--port", "9000"], "args": {"port": "9000"}}
    assert server_endpoint("x", llama)["engine"] == "llama.cpp" and server_endpoint("x", llama)["port"] == 9000
    unknown = {"kind": None, "argv": ["python", "serve.py"], "args": {}}
    assert "no --port" in server_endpoint("serve.py", unknown)["error"]
