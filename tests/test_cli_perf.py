"""`--perf` end to end on the `local` target: real CPU measurements, a fake nvidia-smi
replaying an idle H200, and a venv whose torch refuses to import."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from driftwatch.cli import main
from tests.localhost import local_host


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("FAKE_NVIDIA_SMI_PHASE", "idle")
    return local_host(tmp_path, monkeypatch)


def stored(host: Path) -> list[Path]:
    return sorted((host / "snapshots" / "local").glob("*.json"))


def test_two_back_to_back_perf_snapshots_of_an_unchanged_host_report_no_perf_drift(
    host: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["snapshot", "local", "--perf", "--json"]) == 0
    assert main(["snapshot", "local", "--perf", "--json"]) == 0
    first, second = (entry["snapshot"]["probes"]["perf"] for entry in
                     (json.loads(part)[0] for part in _json_documents(capsys.readouterr().out)))
    for record in (first, second):
        facts = record["facts"]
        assert record["status"] == "ok" and facts["cpu"]["status"] == "ok"
        # The venv's torch refuses to import (tests/venvs.py): said, within the bound.
        assert facts["gpu"]["status"] == "error"
        assert "driftwatch must never import torch" in facts["gpu"]["reason"]
        assert record["duration_s"] < 60
    assert second["facts"]["history"]["cpu.gemm"]["values"][0] == first["facts"]["cpu"]["figures"]["gemm"]["value"]
    assert main(["diff", "local@~1", "local@latest", "--json"]) == 0
    changes = json.loads(capsys.readouterr().out)["changes"]
    assert [c for c in changes if c["category"] == "perf"] == []


def test_check_perf_names_a_confirmed_drop_against_the_history(host: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["snapshot", "local", "--perf", "--label", "good"]) == 0
    [good] = stored(host)
    document = json.loads(good.read_text())
    # The baseline's history: this host used to be a thousand times faster at GEMM.
    history = document["probes"]["perf"]["facts"]["history"]["cpu.gemm"]
    history["values"] = [v * 1000 for v in history["values"]]
    good.write_text(json.dumps(document))
    capsys.readouterr()
    assert main(["check", "local", "--perf", "--json"]) == 2
    [entry] = json.loads(capsys.readouterr().out)
    perf = [c for c in entry["changes"] if c["category"] == "perf"]
    assert [c["item"] for c in perf] == ["cpu.gemm"]
    assert perf[0]["severity"] == "critical" and perf[0]["drift"]
    assert perf[0]["explanation"].startswith("CPU GEMM −100% (")
    assert ", confirmed by a re-measurement; " in perf[0]["explanation"]
    latest = json.loads(stored(host)[-1].read_text())["probes"]["perf"]["facts"]
    assert isinstance(latest["cpu"]["figures"]["gemm"]["remeasured"], float)
    assert main(["history", "local", "--item", "perf", "--json"]) == 0
    steps = json.loads(capsys.readouterr().out)
    assert any(c["item"] == "cpu.gemm" for step in steps["steps"] for c in step["changes"])


def test_without_perf_nothing_is_measured_and_a_perf_baseline_is_no_drift(
    host: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["snapshot", "local", "--perf", "--label", "good"]) == 0
    capsys.readouterr()
    # Another suite's processes on this machine may drift the processes probe: the perf
    # probe's absence is what is checked here, and it is context, never drift.
    assert main(["check", "local", "--json"]) in (0, 2)
    [entry] = json.loads(capsys.readouterr().out)
    about_perf = [c for c in entry["changes"] if "perf" in (c["category"], c["item"])]
    assert [(c["category"], c["status"]) for c in about_perf] == [("probe", "context")]
    assert "perf" not in json.loads(stored(host)[-1].read_text())["probes"]


def test_watch_perf_true_in_the_config_turns_it_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("FAKE_NVIDIA_SMI_PHASE", "load")  # busy GPUs: refused, never touched
    local_host(tmp_path, monkeypatch, watch="perf = true\nperf_timeout = 30\n")
    assert main(["snapshot", "local", "--json"]) == 0
    [entry] = json.loads(capsys.readouterr().out)
    facts = entry["snapshot"]["probes"]["perf"]["facts"]
    assert facts["bound_s"] == 30 and facts["gpu"]["status"] == "refused"
    assert facts["gpu"]["reason"].startswith("GPU 0 busy: ") and "pid 10309, 27.6 GiB" in facts["gpu"]["reason"]


def test_help_explains_perf(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("snapshot", "check"):
        assert main([command, "--help"]) == 0
        out = " ".join(capsys.readouterr().out.split())
        assert "--perf" in out and "refused" in out


def _json_documents(text: str) -> list[str]:
    """The outputs of several --json commands printed one after the other."""
    decoder, found, at = json.JSONDecoder(), [], 0
    while at < len(text):
        while at < len(text) and text[at].isspace():
            at += 1
        if at >= len(text):
            break
        _, end = decoder.raw_decode(text, at)
        found.append(text[at:end])
        at = end
    return found

