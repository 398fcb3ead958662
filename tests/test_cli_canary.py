"""The canary end to end through the CLI, against a real llama-cpp-python server on this CPU.

A host serves SmolLM2-135M; its good state is `snapshot --canary --label good`. The model
file is then replaced under the server (the same path, another quantization) and the server
restarted with the very same command line: nothing the other probes read changed, the answers
did, and `check --canary` says so, with its exit code, its textfile gauge and its JSON. A
restart of the unchanged model says nothing.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from driftwatch.cli import main
from tests.llama import LlamaServer, model_file, new_server, require, requantized
from tests.localhost import local_host

PROMPTS = """
[[canary.prompts]]
name = "capital"
messages = [{role = "user", content = "What is the capital of France? Answer in one sentence."}]
[[canary.prompts]]
name = "story"
prompt = "Once upon a time, in a small village by the sea,"
"""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LlamaServer, Path, Path]]:
    """A server whose model file lives in a folder of the test's, and the Q4_0 file to swap in."""
    require()
    root = tmp_path_factory.mktemp("served")
    model = root / "models" / "smollm2.gguf"
    model.parent.mkdir()
    shutil.copy(model_file(), model)
    other = requantized(root)
    server = new_server(root, alias="smollm2").start(model)
    yield server, model, other
    server.stop()


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, served: tuple[LlamaServer, Path, Path]) -> Path:
    """`local` as a GPU host (the fake nvidia-smi replaying an H200) that watches this server only."""
    server, _, _ = served
    root = local_host(tmp_path, monkeypatch, watch=f'processes = ["--port {server.port}"]\n', local_name="node")
    with (root / "driftwatch.toml").open("a") as config:
        # 8 tokens: each one costs ~0.16 s here (llama-cpp-python's top-5 alternatives, in Python), and
        # both models of the swap part within the first 7 ("Paris." against "Paris, the capital ...").
        config.write(f"[canary]\nmax_tokens = 8\ndeadline = 300\nrequest_timeout = 120\n{PROMPTS}")
        # What a user on a shared box does: the server's tokens/s here measure the rest of the
        # suite on the same 2 cores (CI saw 13 -> 5 tokens/s from an unchanged server), not drift.
        config.write('[[ignore]]\ncategory = "canary"\nitem = "* speed"\nreason = "the test suite shares 2 cores"\n')
    return root


def test_a_model_file_swapped_under_the_server_is_found_by_check(
    host: Path, served: tuple[LlamaServer, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    server, model, other = served
    # One run of each prompt: the run-to-run noise is measured in the next test and in
    # tests/probes/test_canary_llama.py; here each of four canaries costs half as much.
    config = host / "driftwatch.toml"
    config.write_text(config.read_text().replace("max_tokens = 8\n", "max_tokens = 8\nrepeats = 1\n"))
    assert main(["snapshot", "local", "--canary", "--label", "good"]) == 0
    capsys.readouterr()
    assert main(["show", "node@good"]) == 0
    shown = capsys.readouterr().out
    assert "Output canary" in shown and "'The capital of France is Paris." in shown

    # Restarted, same model, same command line: nothing to say.
    server.stop()
    server.start(model)
    assert main(["check", "local", "--canary", "--json"]) == 0, capsys.readouterr().out
    capsys.readouterr()

    # The file under the same path is now another quantization.
    server.stop()
    shutil.copy(other, model)
    server.start(model)
    code = main(["check", "local", "--canary", "--textfile", str(host / "prom")])
    out = capsys.readouterr().out
    assert code == 2, out
    # What broke first, then its cause: the weights under the path the server was started with.
    headline = out.splitlines()[0]
    assert headline.startswith("greedy output of ") and "; most likely cause: " in headline, out
    assert "canary prompts changed on --port" in out and "first divergence at token" in out
    assert "smollm2.gguf weights: 1 of 1 weight files changed (smollm2.gguf: " in out, out
    prom = (host / "prom" / "driftwatch_node.prom").read_text()
    changed = next(line for line in prom.splitlines() if line.startswith("driftwatch_canary_changed{"))
    assert float(changed.rsplit(" ", 1)[1]) >= 1

    assert main(["diff", "node@good", "node@latest", "--json"]) == 2
    changes = json.loads(capsys.readouterr().out)["changes"]
    symptoms = [c for c in changes if c["category"] == "canary" and c["severity"] == "high"]
    assert symptoms and all(c["new"]["kind"] == "changed" for c in symptoms)
    [weights] = [c for c in changes if c["category"] == "file" and "weights:" in c["explanation"]]
    assert weights["severity"] == "high"


def test_canary_command_stores_a_canary_that_diff_compares(
    host: Path, served: tuple[LlamaServer, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    server, _, _ = served
    assert main(["canary", "local", "--url", server.url, "--label", "good", "--json"]) == 0
    [entry] = json.loads(capsys.readouterr().out)
    assert sorted(entry["snapshot"]["probes"]) == ["canary", "processes", "system"]
    assert main(["canary", "local"]) == 0  # found by its command line: the same server, keyed by port
    out = capsys.readouterr().out
    assert "capital" in out and "2× the same" in out
    assert main(["diff", "node@good", "node@latest"]) == 0, capsys.readouterr().out
