"""The models probe against a real local model directory and a real hub cache layout."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from driftwatch.collect import run_probe
from driftwatch.explain import diff_snapshots
from driftwatch.model import ProbeRecord, ProbeStatus
from driftwatch.probes.base import ProbeContext
from driftwatch.probes.models import ModelsProbe, classify, hub_cache
from driftwatch.settings import WatchSettings
from driftwatch.transport.local import LocalTransport
from tests.diff.builders import make_snapshot
from tests.hfcache import CONFIG, GENERATION, TEMPLATE, etag, model_files, repo_dir, write_revision
from tests.seed import seed_log


def record(previous: dict[str, Any] | None = None, **watch: Any) -> ProbeRecord:
    settings = WatchSettings(processes=[], **watch)
    ctx = ProbeContext(transport=LocalTransport(), watch=settings, timeout=30, previous=previous or {})
    result = run_probe(ModelsProbe(), ctx)
    assert result.status is ProbeStatus.ok, result.error
    return result


def test_hub_model_revision_blobs_and_values(home: Path) -> None:
    cache = home / ".cache" / "huggingface" / "hub"
    commit = write_revision(cache, "Qwen/Qwen3-8B", model_files())
    facts = record(models=["Qwen/Qwen3-8B"]).facts
    model = facts["models"]["Qwen/Qwen3-8B"]
    assert model["kind"] == "hub" and model["sources"] == ["config"] and model["exists"] is True
    assert model["path"] == str(repo_dir(cache, "Qwen/Qwen3-8B")) and model["revision"] == commit
    assert model["refs"] == {"main": commit} and model["error"] is None
    gen = model["files"]["generation_config.json"]
    assert gen["blob"] == etag("generation_config.json", model_files()["generation_config.json"])
    assert gen["values"] == {**GENERATION, "eos_token_id": "[151645, 151643]"} and gen["mtime"] is None
    tok = model["files"]["tokenizer_config.json"]["values"]
    assert tok["eos_token"] == "<|im_end|>" and tok["chat_template"].startswith(f"<{len(TEMPLATE)} chars, sha256 ")
    assert set(model["files"]) == {"config.json", "generation_config.json", "tokenizer_config.json", "tokenizer.json",
                                   "model.safetensors.index.json"}
    shard = model["weights"]["model-00001-of-00002.safetensors"]
    assert shard["size"] == 64 and shard["blob"] == etag("x.safetensors", b"w" * 64)
    assert model["other_files"] == 1 and facts["volatile"] == {"read": 5, "reused": 0}


def test_second_snapshot_reads_no_model_file_and_says_so(home: Path) -> None:
    write_revision(home / ".cache" / "huggingface" / "hub", "Qwen/Qwen3-8B", model_files())
    local = home / "models" / "llama"
    local.mkdir(parents=True)
    for name, data in model_files().items():
        (local / name).write_bytes(data)
    first = record(models=["Qwen/Qwen3-8B", str(local)])
    second = record(previous=first.facts, models=["Qwen/Qwen3-8B", str(local)])
    assert second.facts["volatile"] == {"read": 0, "reused": 10}
    assert second.facts["models"] == first.facts["models"]


def test_hub_update_moves_revision_and_blob(home: Path) -> None:
    cache = home / ".cache" / "huggingface" / "hub"
    write_revision(cache, "Qwen/Qwen3-8B", model_files())
    first = record(models=["Qwen/Qwen3-8B"])
    newer = write_revision(cache, "Qwen/Qwen3-8B", model_files({**GENERATION, "temperature": 1.0}))
    second = record(previous=first.facts, models=["Qwen/Qwen3-8B"])
    model = second.facts["models"]["Qwen/Qwen3-8B"]
    assert model["revision"] == newer and model["files"]["generation_config.json"]["values"]["temperature"] == 1.0
    assert second.facts["volatile"] == {"read": 1, "reused": 4}  # only the file whose blob changed


def test_local_directory_hashes_small_files_and_never_reads_a_terabyte_of_weights(home: Path) -> None:
    local = home / "models" / "big"
    (local / "original").mkdir(parents=True)
    (local / "config.json").write_text(json.dumps(CONFIG))
    (local / "chat_template.jinja").write_text(TEMPLATE)
    (local / "original" / "tokenizer.model").write_bytes(b"\x0a\x05sp")
    for i in range(4):  # 4 x 256 GiB, sparse: reading them would never finish
        with open(local / f"model-{i:05d}-of-00004.safetensors", "wb") as handle:
            handle.truncate(256 << 30)
    model = record(models=[str(local)]).facts["models"][str(local)]
    assert model["kind"] == "local" and model["exists"] is True and "revision" not in model
    assert model["files"]["chat_template.jinja"]["values"] is None
    assert len(model["files"]["chat_template.jinja"]["sha256"]) == 64
    assert model["files"]["original/tokenizer.model"]["size"] == 4
    assert model["files"]["config.json"]["values"]["hidden_size"] == 4096
    weights = model["weights"]
    assert sorted(weights) == [f"model-{i:05d}-of-00004.safetensors" for i in range(4)]
    assert {w["size"] for w in weights.values()} == {256 << 30}
    assert all(w["mtime"] and w["blob"] is None for w in weights.values())


def test_a_single_gguf_file_is_the_model_and_its_replacement_is_a_weights_change(home: Path) -> None:
    # llama.cpp's and vLLM's --model may be one .gguf file: the file is the weights.
    gguf = home / "models" / "smollm2.gguf"
    gguf.parent.mkdir()
    gguf.write_bytes(b"GGUF" + b"\0" * 60)
    first = record(models=[str(gguf)])
    model = first.facts["models"][str(gguf)]
    assert model["exists"] is True and model["error"] is None and model["kind"] == "local"
    assert list(model["weights"]) == ["smollm2.gguf"] and model["weights"]["smollm2.gguf"]["size"] == 64
    assert model["files"] == {} and first.facts["volatile"] == {"read": 0, "reused": 0}  # never read
    gguf.write_bytes(b"GGUF" + b"\1" * 50)  # another quantization copied over the same path
    second = record(previous=first.facts, models=[str(gguf)])
    [change] = diff_snapshots(make_snapshot(models=first.facts), make_snapshot(minutes=60, models=second.facts)).changes
    assert change.explanation == f"{gguf} weights: 1 of 1 weight files changed (smollm2.gguf: 64 B → 54 B)"


def test_missing_model_and_missing_hub_entry_are_facts(home: Path) -> None:
    facts = record(models=["/nowhere/model", "org/never-downloaded"]).facts["models"]
    assert facts["/nowhere/model"]["exists"] is False and facts["/nowhere/model"]["kind"] == "local"
    assert facts["org/never-downloaded"] == {**facts["org/never-downloaded"], "exists": False, "kind": "hub",
                                             "revision": None}


def test_hub_cache_moved_by_hf_home_in_the_login_environment(home: Path) -> None:
    cache = home.parent / "hf" / "hub"
    commit = write_revision(cache, "Qwen/Qwen3-8B", model_files())
    (home / ".profile").write_text(f"export HF_HOME={home.parent / 'hf'}\n")
    model = record(models=["Qwen/Qwen3-8B"]).facts["models"]["Qwen/Qwen3-8B"]
    assert model["revision"] == commit and model["path"].startswith(str(cache))


def test_a_ref_pointing_at_a_missing_snapshot_is_an_error_fact(home: Path) -> None:
    cache = home / ".cache" / "huggingface" / "hub"
    write_revision(cache, "Qwen/Qwen3-8B", model_files())
    (repo_dir(cache, "Qwen/Qwen3-8B") / "refs" / "main").write_text("f" * 40)
    model = record(models=["Qwen/Qwen3-8B"]).facts["models"]["Qwen/Qwen3-8B"]
    assert model["error"] == f"snapshot {'f' * 40} is not in the hub cache" and model["revision"] == "f" * 40


def test_nothing_served_and_nothing_configured_is_skipped(home: Path) -> None:
    ctx = ProbeContext(transport=LocalTransport(), watch=WatchSettings(processes=[]), timeout=30)
    result = run_probe(ModelsProbe(), ctx)
    assert result.status is ProbeStatus.skipped


@pytest.mark.parametrize(
    ("model", "served", "kind"),
    [("/models/llama", True, "local"), ("~/m", False, "local"), ("Qwen/Qwen3-8B", False, "hub"),
     ("Qwen/Qwen3-8B", True, "auto"), ("gpt2", True, "auto"), ("./m", True, "auto"), ("./m", False, None),
     ("a b/c", False, None)],
)
def test_classify(model: str, served: bool, kind: str | None) -> None:
    assert classify(model, served) == kind


def test_hub_cache_follows_huggingface_hub_precedence() -> None:
    assert hub_cache({"HF_HOME": "/h", "HF_HUB_CACHE": "/c"}) == "/c"
    assert hub_cache({"HF_HOME": "/h", "XDG_CACHE_HOME": "/x"}) == "/h/hub"
    assert hub_cache({"XDG_CACHE_HOME": "/x"}) == "/x/huggingface/hub"
    assert hub_cache(None, {"HF_HOME": "/login"}) == "/login/hub"  # the server's env unknown
    assert hub_cache({}, {"HF_HOME": "/login"}) == "~/.cache/huggingface/hub"  # known, and unset
    assert os.path.basename(hub_cache()) == "hub"


def test_the_model_a_servers_log_names_is_described(home: Path) -> None:
    local = home / "models" / "DeepSeek-V3"
    local.mkdir(parents=True)
    (local / "generation_config.json").write_text(json.dumps(GENERATION))
    logs = home / "logs"
    logs.mkdir()
    (logs / "server.log").write_text(seed_log(0.88, fails=False).replace("/models/DeepSeek-V3", str(local)))
    facts = record(logs=[f"{logs}/*.log"]).facts["models"]
    assert list(facts) == [str(local)] and facts[str(local)]["sources"] == [f"log {logs}/*.log"]
    assert facts[str(local)]["files"]["generation_config.json"]["values"]["temperature"] == 0.6
