"""Model file diffs: the file, the revision move and the key whose value changed."""

from __future__ import annotations

import copy
from typing import Any

from driftwatch.diff import Severity

from driftwatch.explain import diff_snapshots
from driftwatch.diff.change import Change
from tests.diff.builders import make_snapshot

REPO = "Qwen/Qwen3-8B"
OLD_REV, NEW_REV = "3f2a9c41" + "0" * 32, "9b1c0d27" + "1" * 32


def small(blob: str, values: dict[str, Any] | None) -> dict[str, Any]:
    return {"size": 100, "mtime": None, "blob": blob, "error": None, "sha256": None, "values": values,
            "volatile": {"mtime": 1.0}}


def hub(revision: str, temperature: float, shard_blob: str = "s" * 64) -> dict[str, Any]:
    gen = {"temperature": temperature, "top_p": 0.95, "do_sample": True}
    return {"models": {REPO: {
        "kind": "hub", "sources": ["server sglang.launch_server"], "path": "/root/.cache/huggingface/hub/models--Qwen--Qwen3-8B",
        "exists": True, "error": None, "repo": REPO, "revision": revision, "refs": {"main": revision},
        "files": {"config.json": small("c" * 40, {"hidden_size": 4096}),
                  "generation_config.json": small(f"g{temperature}".ljust(40, "0"), gen)},
        "weights": {"model-00001-of-00001.safetensors": {"size": 16 << 30, "mtime": None, "blob": shard_blob,
                                                          "error": None, "volatile": {}}},
        "truncated": None, "other_files": 1}},
        "servers_error": None, "volatile": {"read": 2, "reused": 0}}


def changes(old: dict[str, Any], new: dict[str, Any]) -> list[Change]:
    return diff_snapshots(make_snapshot(models=old), make_snapshot(minutes=60, models=new)).changes


def test_hub_update_names_the_file_the_revision_and_the_value() -> None:
    [change] = changes(hub(OLD_REV, 0.6), hub(NEW_REV, 1.0))
    assert (change.category, change.item, change.severity) == ("file", f"{REPO}/generation_config.json", Severity.high)
    assert change.explanation == (
        f"{REPO} generation_config.json changed (revision 3f2a9c4… → 9b1c0d2…): temperature 0.6 → 1.0")


def test_revision_moved_with_nothing_of_interest_changed_is_context() -> None:
    new = hub(NEW_REV, 0.6)
    [change] = changes(hub(OLD_REV, 0.6), new)
    assert change.severity is Severity.info and "no file that changes behaviour differs" in change.explanation
    assert change.context


def test_weights_summarised_in_one_line() -> None:
    [change] = changes(hub(OLD_REV, 0.6), hub(NEW_REV, 0.6, shard_blob="t" * 64))
    assert change.severity is Severity.high
    assert change.explanation == (f"{REPO} weights: 1 of 1 weight files changed (model-00001-of-00001.safetensors: "
                                  "16.0 GiB → 16.0 GiB, revision 3f2a9c4… → 9b1c0d2…)")


def test_local_file_edited_names_sha_and_touched_is_info() -> None:
    old = hub(OLD_REV, 0.6)
    model = old["models"][REPO]
    model.update(kind="local", revision=None, refs=None)
    model["files"]["generation_config.json"].update(blob=None, sha256="a" * 64, mtime=1.0)
    new = copy.deepcopy(old)
    new["models"][REPO]["files"]["generation_config.json"].update(sha256="b" * 64, values={"temperature": 0.7,
                                                                                           "top_p": 0.95})
    [change] = changes(old, new)
    assert change.explanation == (f"{REPO} generation_config.json changed (sha256 aaaaaaa… → bbbbbbb…): "
                                  "do_sample removed (was True), temperature 0.6 → 0.7")
    touched = copy.deepcopy(old)
    touched["models"][REPO]["files"]["generation_config.json"]["mtime"] = 2.0
    [change] = changes(old, touched)
    assert change.severity is Severity.info and "touched, content identical" in change.explanation
    assert change.context


def test_a_model_gone_from_the_cache_is_high() -> None:
    new = hub(OLD_REV, 0.6)
    new["models"][REPO].update(exists=False, files={}, weights={}, revision=None)
    [change] = changes(hub(OLD_REV, 0.6), new)
    assert change.severity is Severity.high and change.explanation.startswith(f"{REPO} is gone")
