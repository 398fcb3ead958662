"""The canary against a REAL OpenAI-compatible server: llama-cpp-python serving SmolLM2-135M on
the CPU (tests/llama.py), and the changes a real host goes through: another chat template
(and with it the default system prompt), another quantization of the model file, and a
restart with another --seed and --n_ctx (server-side defaults a greedy, fully explicit
request must not see)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from driftwatch.canary.classify import noise, runs_of
from driftwatch.canary.settings import DEFAULT_PROMPTS, CanarySettings
from driftwatch.collect import run_probe
from driftwatch.diff.canary import diff_server
from driftwatch.model import ProbeStatus
from driftwatch.probes.base import ProbeContext
from driftwatch.probes.canary import CanaryProbe
from driftwatch.settings import WatchSettings
from driftwatch.transport.local import LocalTransport
from tests.llama import LlamaServer, new_server, require, requantized

# Every token costs ~0.16 s on this CPU (llama-cpp-python computes each token's top-5 alternatives in
# Python), so the tests ask little: two chat prompts and a raw completion, 8 tokens each (the Q4_0 and
# Q4_1 models part within the first 7 tokens of two of them).
PROMPTS = [p for p in DEFAULT_PROMPTS if p.name in ("capital", "translate", "primes")]
# Generous deadlines: the shared 2-core machine is slow when other suites load it (the canary's
# own bounds are tested against local sockets in test_canary.py).
SETTINGS = CanarySettings(prompts=PROMPTS, max_tokens=8, deadline=300, request_timeout=120)
# A variant, and the server found by its command line, are asked once per prompt: the baseline's
# two runs measure the server's noise.
ONCE = SETTINGS.model_copy(update={"repeats": 1})


def answers(baseline: dict[str, Any], now: dict[str, Any]) -> list[Any]:
    """The canary's changes but its speed: these tests change how the server answers, and the
    tokens/s of a server sharing 2 cores with the rest of the suite measure the suite's load (seen in
    CI: 13 -> 5 tokens/s on an unchanged server). The speed comparison is tested in tests/diff."""
    return [c for c in diff_server("llama", baseline, now) if not c.item.endswith(" speed")]


def ask(url: str | None = None, pattern: str | None = None, settings: CanarySettings = SETTINGS) -> dict[str, Any]:
    """The canary's facts of the one server at ``url`` (or found by ``pattern``)."""
    watch = WatchSettings(processes=[pattern] if pattern else [])
    ctx = ProbeContext(transport=LocalTransport(), watch=watch, timeout=30)
    record = run_probe(CanaryProbe(settings, url=url), ctx)
    assert record.status is ProbeStatus.ok, record.error
    [server] = record.facts["servers"].values()
    assert server["state"] == "ok", server["error"]
    return server


@pytest.fixture(scope="module")
def baseline(llama: LlamaServer) -> dict[str, Any]:
    return ask(llama.url)


@pytest.fixture(scope="module")
def variant(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
            llama: LlamaServer) -> Iterator[LlamaServer]:
    """Another server of the same model id (``--model_alias``) with ``request.param``'s arguments;
    ``quantized`` serves the same weights requantized to Q4_0."""
    require()
    root = tmp_path_factory.mktemp("variant")
    args: tuple[str, ...] = request.param
    model = None
    if args == ("quantized",):
        args, model = (), requantized(root)
    server = new_server(root, *args, alias=llama.alias).start(model)
    yield server
    server.stop()


def test_a_server_found_by_its_command_line_answers_greedy_and_the_same_twice(
    llama: LlamaServer, baseline: dict[str, Any]
) -> None:
    found = ask(pattern=f"--port {llama.port}", settings=ONCE)  # from the processes probe's argv, not a URL
    assert found["dialect"] == "llama.cpp" and found["source"] == "command line"
    assert found["url"] == llama.url and found["model"] == llama.alias
    assert sorted(found["prompts"]) == sorted(baseline["prompts"]) == sorted(p.name for p in PROMPTS)
    for name, prompt in baseline["prompts"].items():
        runs = runs_of(prompt)
        assert len(runs) == 2 and noise(runs) is None, name  # measured: the server is exact run to run
        assert runs[0]["tokens"] and len(runs[0]["top"][0]) == 5 and runs[0]["prompt_tokens"], name
    assert found["prompts"]["capital"]["runs"][0]["text"].startswith("The capital of France is Paris")
    assert answers(baseline, found) == []


@pytest.mark.parametrize("variant", [("--chat_format", "chatml")], indirect=True)
def test_another_chat_template_is_the_template_symptom(baseline: dict[str, Any], variant: LlamaServer) -> None:
    changes = answers(baseline, ask(variant.url, settings=ONCE))
    [change] = [c for c in changes if c.drift]
    assert change.item == "llama prompt tokens" and change.category == "canary"
    # The GGUF's template adds SmolLM's default system prompt; chatml does not.
    assert "prompt tokens moved on 2/3 canary prompts" in change.explanation
    assert "primes" not in change.new["prompts"]  # a raw completion has no template


@pytest.mark.parametrize("variant", [("--seed", "7", "--n_ctx", "1024")], indirect=True)
def test_a_restart_with_another_seed_and_context_leaves_greedy_answers_identical(
    baseline: dict[str, Any], variant: LlamaServer
) -> None:
    assert answers(baseline, ask(variant.url, settings=ONCE)) == []


@pytest.mark.parametrize("variant", [("quantized",)], indirect=True)
def test_another_quantization_of_the_model_changes_answers(baseline: dict[str, Any], variant: LlamaServer) -> None:
    changes = [c for c in answers(baseline, ask(variant.url, settings=ONCE)) if c.drift]
    assert changes, "a Q4_0 model answered exactly like the Q4_1 one"
    [change] = [c for c in changes if c.item == "llama"]
    assert change.explanation.startswith("greedy output of ") and "first divergence at token" in change.explanation
    assert change.new["kind"] == "changed"
