"""Which store a command read, and a store it cannot read: one line each, never a traceback.

The unreadable store is a real one written by another user: as root (CI), the store is
handed to ``nobody`` and driftwatch runs without the capabilities that let root read
anyone's files; as another user, the store's folder is closed to its owner.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from driftwatch.cli import main
from driftwatch.store import SnapshotStore
from tests.builders import snapshot

COMMANDS = [
    ["list"], ["list", "gpu01"], ["show", "gpu01@latest"], ["diff", "gpu01@good", "gpu01@latest"],
    ["history", "gpu01"], ["doctor", "gpu01@latest"], ["accept", "gpu01", "--reason", "r"], ["accept", "--list"],
    ["label", "gpu01@latest", "good"], ["fleet"], ["prune", "--keep", "1"],
]


def another_users_store(root: Path) -> list[str]:
    """Make ``root`` a store this user cannot read; the command prefix that runs driftwatch so."""
    store = SnapshotStore(str(root))
    store.save(snapshot(minutes=0, labels=["good"]))
    store.save(snapshot(minutes=1))
    if os.geteuid() != 0:
        root.chmod(0)
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("SKIPPED LOUDLY: setpriv (util-linux) is missing: root cannot be made to see another user's store")
    for path in [root, *root.rglob("*")]:
        os.chown(path, 65534, 65534, follow_symlinks=False)  # nobody
    return [setpriv, "--bounding-set=-dac_override,-dac_read_search"]


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: " ".join(a))
def test_a_store_another_user_wrote_is_one_line(tmp_path: Path, argv: list[str]) -> None:
    prefix = another_users_store(tmp_path / "store")
    try:
        done = subprocess.run([*prefix, sys.executable, "-m", "driftwatch", *argv, "--store", str(tmp_path / "store")],
                              cwd=tmp_path, capture_output=True, text=True, timeout=60)
    finally:
        (tmp_path / "store").chmod(0o700)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("driftwatch: error: ") and "Permission denied" in line and "--store" in line, line
    assert done.stdout == ""


def test_list_says_which_store_it_read_and_that_it_is_empty(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["list"]) == 1  # `cd ~ && driftwatch list`: no ./snapshots here
    err = capsys.readouterr().err
    assert "snapshot store snapshots (the default, relative to this folder" in err and "does not exist" in err
    assert main(["list", "--store", str(tmp_path / "nonexistent")]) == 1
    assert f"{tmp_path / 'nonexistent'} (from --store) does not exist" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    (tmp_path / "driftwatch.toml").write_text('store = "empty"\n')
    assert main(["list"]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == "" or "no snapshots" not in out
    assert "snapshot store empty (from driftwatch.toml) has no snapshots" in err


@pytest.mark.parametrize("argv", [["diff", "gpu01", "gpu01@latest"], ["show", "gpu01"], ["label", "gpu01", "x"]])
def test_a_bare_host_is_no_ref(
    argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # `diff gpu01 gpu01@latest` meant gpu01@good: it must not silently compare latest with itself.
    monkeypatch.chdir(tmp_path)
    store = SnapshotStore("snapshots")
    store.save(snapshot(minutes=0, labels=["good"]))
    store.save(snapshot(minutes=1))
    assert main(argv) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("driftwatch: error: 'gpu01' names no snapshot: write gpu01@latest"), err
    assert "gpu01@<label> (good)" in err
