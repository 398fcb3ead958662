"""What every command's --json prints: one JSON document, safe to paste into a terminal."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from driftwatch.commands.common import print_json


def test_print_json_is_one_indented_document_with_host_text_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    taken = datetime(2026, 11, 29, 23, 0, tzinfo=timezone.utc)
    document = [{"host": "gpu01", "path": Path("/srv/store/gpu01/x.json"), "taken_at": taken,
                 "note": "caf\u00e9 \x1b[31mred\x1b[0m", "ratio": 0.88, "missing": None}]
    print_json(document)
    out = capsys.readouterr().out
    assert out.endswith("}\n]\n") and out.startswith('[\n {\n  "host": "gpu01"')
    assert "\x1b" not in out  # a hostile host's escape sequence stays an escape in the text
    assert json.loads(out) == [{"host": "gpu01", "path": "/srv/store/gpu01/x.json", "taken_at": "2026-11-29T23:00:00Z",
                                "note": "caf\u00e9 \x1b[31mred\x1b[0m", "ratio": 0.88, "missing": None}]


def test_off_a_terminal_nothing_is_wrapped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # cron mail, `| less`, CI logs: a snapshot file name broken at 80 columns cannot be pasted back.
    from driftwatch.cli import main
    from driftwatch.store import SnapshotStore
    from tests.builders import snapshot

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("COLUMNS", raising=False)
    host = "gpu-node-with-a-long-hostname-0001.cluster.example.internal"
    stored = SnapshotStore("snapshots").save(snapshot(host, labels=["good"]))
    assert main(["list"]) == 0
    [header, row] = capsys.readouterr().out.splitlines()
    assert row.startswith(host) and row.rstrip().endswith(str(stored)) and len(row) > 120
    assert main(["show", f"{host}@good"]) == 0
    assert any(host in line for line in capsys.readouterr().out.splitlines())
