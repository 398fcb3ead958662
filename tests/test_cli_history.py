"""`driftwatch history`: a real host's NCCL timeline over SSH, and a store with damaged files."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from driftwatch.cli import main
from driftwatch.store import SnapshotStore
from tests.builders import snapshot
from tests.sshd import Sshd
from tests.venvs import make_gpu_venv, site_packages, write_dist_info


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def set_nccl(venv: Path, version: str) -> None:
    site = site_packages(venv)
    for old in site.glob("nvidia_nccl_cu12-*.dist-info"):
        for path in sorted(old.rglob("*"), reverse=True):
            path.unlink()
        old.rmdir()
    files = {"nvidia/nccl/__init__.py": "", "nvidia/nccl/lib/libnccl.so.2": f"\x7fELF-{version}\n"}
    write_dist_info(site, "nvidia_nccl_cu12", "nvidia-nccl-cu12", version, [], files)


def stamp(taken_at: str) -> str:
    """How a step title shows a snapshot's time."""
    return datetime.fromisoformat(taken_at).strftime("%Y-%m-%d %H:%M:%S UTC")


def test_item_nccl_shows_both_upgrades_with_their_times(
    sshd: Sshd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    sshd.fake_env()
    monkeypatch.chdir(tmp_path)
    python = make_gpu_venv(tmp_path / "venv")
    (tmp_path / "driftwatch.toml").write_text(
        f'timeout = 30\nconnect_timeout = 3\nssh_config = "{sshd.ssh_config_path}"\n'
        f'known_hosts = "{sshd.known_hosts_path}"\n[watch]\npython = ["{python}"]\nprocesses = []\n'
    )
    assert main(["snapshot", "testhost", "--label", "good"]) == 0
    for version in ("2.27.7", "2.28.3"):
        set_nccl(tmp_path / "venv", version)
        assert main(["snapshot", "testhost"]) == 0
    _, listed, _ = run(capsys, "list", "testhost", "--json")
    times = [entry["taken_at"] for entry in json.loads(listed)]

    code, out, err = run(capsys, "history", "testhost", "--item", "nccl")
    assert code == 0, err
    assert "testhost: 2 steps with changes mentioning 'nccl' across 3 snapshots" in out
    # Step titles, oldest first (two snapshots may fall in the same second: search on).
    first = out.index(f"{stamp(times[1])} (since")
    second = out.index(f"{stamp(times[2])} (since", first + 1)
    assert "nvidia-nccl-cu12 2.27.3 → 2.27.7" in out[first:second]
    assert "nvidia-nccl-cu12 2.27.7 → 2.28.3" in out[second:]
    assert f"(since {stamp(times[0])} [good])" in out

    code, out, _ = run(capsys, "history", "testhost", "--item", "nccl", "--json")
    steps = json.loads(out)["steps"]
    assert [s["at"] for s in steps] == times[1:]
    assert [c["new"] for s in steps for c in s["changes"] if c["category"] == "package"] == ["2.27.7", "2.28.3"]

    code, out, _ = run(capsys, "history", "testhost", "--item", "sgl-kernel")
    assert code == 0 and "0 steps with changes mentioning 'sgl-kernel'" in out

    code, out, _ = run(capsys, "history", "testhost", "--since", times[2], "--markdown")
    assert code == 0 and out.count("### ") == 1 and "2.28.3" in out and "2.27.3 →" not in out


def test_damaged_files_are_skipped_each_named_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    store = SnapshotStore(tmp_path / "snapshots")
    for minutes, kernel in enumerate(["0.3.16", "0.3.16", "0.3.17", "0.3.17", "0.3.18"]):
        store.save(snapshot(minutes=minutes * 60, labels=["good"] if minutes == 0 else [], gpu={"sgl_kernel": kernel}))
    paths = store.paths("gpu01")
    paths[1].write_text(paths[1].read_text()[:200])  # truncated by a full disk
    paths[3].write_text('{"hello": "not a snapshot"}')
    code, out, err = run(capsys, "history", "gpu01")
    assert code == 0
    for damaged in (paths[1], paths[3]):
        assert err.count(f"gpu01/{damaged.name}") == 1, err
    assert "2 unreadable snapshot files skipped" in out
    assert "2 steps with changes across 3 snapshots" in out
    assert out.count("1 unreadable snapshot between, skipped") == 2
    assert "0.3.16 → 0.3.17" in out and "0.3.17 → 0.3.18" in out


def test_history_mistakes_are_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    SnapshotStore(tmp_path / "snapshots").save(snapshot())
    for argv, message in (
        (["history", "gpu99"], "no snapshots of 'gpu99'"),
        (["history", "gpu01", "--since", "last tuesday"], "'last tuesday' is not a time"),
        (["history", "gpu01", "--json", "--markdown"], "exclusive"),
        (["history", "gpu01", "--item", " "], "--item needs a word"),
    ):
        code, _, err = run(capsys, *argv)
        assert code == 1 and message in err and "Traceback" not in err, argv
    code, out, _ = run(capsys, "history", "gpu01")
    assert code == 0 and "0 steps with changes across 1 snapshot" in out


def test_history_of_local_is_headed_with_the_name_it_is_stored_under(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.localhost import local_host

    local_host(tmp_path, monkeypatch, watch="processes = []\n", local_name="node17")
    assert main(["snapshot", "local"]) in (0, 3)
    code, out, _ = run(capsys, "list")
    assert code == 0 and "node17" in out
    code, out, _ = run(capsys, "history", "local")
    assert code == 0 and out.startswith("node17: "), out  # as `list` names it, never "local:"
    code, out, _ = run(capsys, "history", "local", "--json")
    assert json.loads(out)["host"] == "node17"
