"""The commands over a damaged, full, unusable or old store, names and labels, file modes.

Snapshots of `local` are real (a venv, a fake nvidia-smi replaying a real H200); a full
disk is a real one: a small tmpfs mounted for the test (this needs root, as CI runs).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from driftwatch.cli import main
from driftwatch.model import utcnow
from driftwatch.store import SnapshotStore
from driftwatch.store.names import snapshot_stem
from tests.builders import snapshot
from tests.localhost import local_host
from tests.s3 import S3Server
from tests.sshd import free_port
from tests.venvs import site_packages, write_dist_info

BROKEN = '{"schema_version": 1, "host": {"na'


@pytest.fixture
def local(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    # No process patterns: servers other tests start on this machine are not this test's drift.
    return local_host(tmp_path, monkeypatch, watch="processes = []\n")


@pytest.fixture(params=["folder", "s3"])
def built(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SnapshotStore:
    """gpu01 at 10:00 (good), 10:01, 10:02, then an unreadable file at 10:03: no SSH.
    In a folder, and in a bucket of a real S3 endpoint (moto, tests/s3.py)."""
    url = "snapshots"
    if request.param == "s3":
        s3: S3Server = request.getfixturevalue("s3")
        s3.use(monkeypatch)
        url = f"s3://{s3.bucket()}/driftwatch"
    (tmp_path / "driftwatch.toml").write_text(f'store = "{url}"\n')
    monkeypatch.chdir(tmp_path)
    store = SnapshotStore(url)
    for minute in range(3):
        store.save(snapshot(minutes=minute, labels=["good"] if minute == 0 else []))
    store.backend.replace(store.location("gpu01", "20260219T100300.000000Z.json"), BROKEN.encode())
    return store


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def upgrade_sgl_kernel(root: Path) -> None:
    site = site_packages(root / "venv")
    for old in site.glob("sgl_kernel-*.dist-info"):
        for item in sorted(old.iterdir()):
            item.unlink()
        old.rmdir()
    write_dist_info(site, "sgl_kernel", "sgl-kernel", "0.3.17", [], {"sgl_kernel/__init__.py": "# 0.3.17\n"})


def alert_program(root: Path) -> tuple[str, Path]:
    out = root / "alerts.jsonl"
    program = root / "alert.sh"
    program.write_text(f"#!/bin/sh\ncat >> {out}\necho >> {out}\n")
    program.chmod(0o755)
    return f"cmd:{program}", out


def alerts(out: Path) -> list[dict]:
    return [json.loads(line) for line in out.read_text().splitlines() if line.strip()] if out.exists() else []


def samples(prom: Path) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    families = text_string_to_metric_families(prom.read_text())
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for f in families for s in f.samples}


def up(metrics: dict, host: str = "local") -> tuple[float | None, float | None, float | None]:
    key = (("host", host),)
    return (metrics.get(("driftwatch_up", key)), metrics.get(("driftwatch_store_write_ok", key)),
            metrics.get(("driftwatch_store_errors", key)))


# -- a damaged store never hides a drift --------------------------------------------


def test_an_unreadable_snapshot_newer_than_the_baseline_does_not_block_check(
    local: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["snapshot", "local", "--label", "good"]) == 0
    bad = Path(f"snapshots/local/{snapshot_stem(utcnow() + timedelta(minutes=1))}.json")  # newer, not in the future
    bad.write_text(BROKEN)
    upgrade_sgl_kernel(local)
    notify, sent = alert_program(local)
    capsys.readouterr()
    code, _, err = run(capsys, "check", "local", "--notify", notify, "--textfile", "prom")
    assert code == 2, err
    assert [a["status"] for a in alerts(sent)] == ["drift"] and "sgl-kernel" in alerts(sent)[0]["text"]
    assert err.count(str(bad)) == 1 and "skipped unreadable snapshot" in err and "Traceback" not in err
    metrics = samples(local / "prom" / "driftwatch_local.prom")
    assert up(metrics) == (1, 1, 1)
    assert metrics[("driftwatch_drift_changes", (("host", "local"), ("severity", "high")))] >= 1
    for _ in range(2):
        assert main(["check", "local", "--notify", notify]) == 2
    files = SnapshotStore("snapshots").paths("local")
    assert len(files) == 3 and bad.absolute() in [Path(f).absolute() for f in files], "the store grew on every run: the unchanged snapshot was not deduplicated"
    assert len(alerts(sent)) == 1


def test_show_diff_label_and_refs_skip_an_unreadable_file_with_one_warning(
    built: SnapshotStore, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = str(built.location("gpu01", "20260219T100300.000000Z.json"))
    code, out, err = run(capsys, "show", "gpu01@good", "--json")
    assert code == 0 and json.loads(out)["labels"] == ["good"]
    assert err.count(bad) == 1 and err.startswith("driftwatch: warning: skipped unreadable snapshot")
    code, out, err = run(capsys, "diff", "gpu01@good", "gpu01@latest", "--json")
    assert code == 0 and json.loads(out)["summary"]["new"]["taken_at"].startswith("2026-02-19T10:02")
    assert err.count(bad) == 1
    code, out, err = run(capsys, "show", "gpu01@2026-02-19T10:0", "--json")
    assert code == 0 and json.loads(out)["taken_at"].startswith("2026-02-19T10:02")
    code, out, err = run(capsys, "show", "gpu01@~1", "--json")
    assert code == 0 and json.loads(out)["taken_at"].startswith("2026-02-19T10:01")
    assert run(capsys, "label", "gpu01@latest", "checked")[0] == 0
    assert built.load(built.paths("gpu01")[2]).labels == ["checked"]
    code, _, err = run(capsys, "show", bad)
    assert code == 1 and bad in err and "Traceback" not in err, "a file named explicitly is still an error"


def test_prune_never_deletes_the_newest_readable_snapshot(built: SnapshotStore, capsys: pytest.CaptureFixture[str]) -> None:
    built.backend.replace(built.location("gpu01", "20260219T100400.000000Z.json"), b"")
    good, older, newest, *unreadable = built.paths("gpu01")
    code, out, err = run(capsys, "prune", "--keep", "1")
    assert code == 0 and older not in built.paths("gpu01")
    assert built.paths("gpu01") == [good, newest, *unreadable]
    assert "removed 1 unlabelled snapshot(s); left 2 unreadable file(s) alone" in out
    assert all(str(p) in err for p in unreadable)
    assert run(capsys, "prune", "--keep-days", "0")[0] == 0 and built.paths("gpu01") == [good, newest, *unreadable]


@pytest.mark.parametrize("built", ["folder"], indirect=True)  # an object PUT leaves no temp file
def test_prune_cleans_temp_files_left_by_a_killed_write(built: SnapshotStore, capsys: pytest.CaptureFixture[str]) -> None:
    folder = Path("snapshots/gpu01")
    stale, fresh = folder / ".tmp-killed.part", folder / ".tmp-writing.part"
    for path in (stale, fresh):
        path.write_text("{half")
    os.utime(stale, (1, 1))
    assert run(capsys, "prune", "--keep", "10")[0] == 0
    assert not stale.exists() and fresh.exists()


# -- names are names ----------------------------------------------------------------


def test_hosts_a_slash_b_and_a_underscore_b_never_mix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    store = SnapshotStore("snapshots")
    store.save(snapshot("a/b", minutes=0))
    store.save(snapshot("a/b", minutes=1))
    store.save(snapshot("a_b", minutes=2))
    code, out, err = run(capsys, "diff", "a/b@~1", "a/b@latest", "--json")
    summary = json.loads(out)["summary"]
    assert (summary["old"]["host"], summary["new"]["host"]) == ("a/b", "a/b") and not summary["different_hosts"], err
    assert code == 0
    code, out, _ = run(capsys, "list", "--json")
    assert code == 0 and sorted(row["host"] for row in json.loads(out)) == ["a/b", "a/b", "a_b"]


BAD_LABELS = ["", "   ", "a/b", "..", "x\x1b]0;pwned\x07", "a\nb", "me@home", "latest", "~1", "2026", "2026-02-19",
              "20260219T1001", " good", pytest.param("g" * 1_000_000, id="a-megabyte")]


@pytest.mark.parametrize("label", BAD_LABELS)
def test_bad_labels_are_one_line_exit_1_everywhere(
    built: SnapshotStore, capsys: pytest.CaptureFixture[str], label: str
) -> None:
    before = built.backend.read(built.paths("gpu01")[2])
    code, _, err = run(capsys, "label", "gpu01@latest", label)
    assert code == 1 and err.startswith("driftwatch: error: bad label") and err.count("\n") == 1
    assert "\x1b" not in err and "Traceback" not in err and len(err) < 300  # a megabyte label is not echoed
    assert built.backend.read(built.paths("gpu01")[2]) == before
    # Refused before connecting: an unreachable host would say so instead.
    down = f"root@127.0.0.1:{free_port()}"
    for argv in (["snapshot", down, "--label", label], ["check", down, "--baseline", label]):
        code, _, err = run(capsys, *argv)
        assert code == 1 and err.startswith("driftwatch: error: bad label"), argv


def test_good_labels_still_work(built: SnapshotStore, capsys: pytest.CaptureFixture[str]) -> None:
    for label in ("good", "baseline-0219", "v1.2", "pre upgrade", "ok-2026"):
        assert run(capsys, "label", "gpu01@latest", label)[0] == 0
        assert run(capsys, "show", f"gpu01@{label}")[0] == 0
    assert run(capsys, "label", "gpu01@latest", "good", "--remove")[0] == 0


# -- permissions --------------------------------------------------------------------


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_files_are_private_and_the_textfile_readable_whatever_the_umask(local: Path) -> None:
    old = os.umask(0)
    try:
        assert main(["snapshot", "local", "--label", "good"]) == 0
        upgrade_sgl_kernel(local)
        notify, _ = alert_program(local)
        assert main(["check", "local", "--notify", notify, "--textfile", "prom"]) == 2
    finally:
        os.umask(old)
    store = SnapshotStore("snapshots")
    folder = Path("snapshots/local")
    assert (mode(store.root), mode(folder)) == (0o700, 0o700)
    assert {mode(p) for p in store.paths("local")} == {0o600}
    assert mode(folder / ".lock") == 0o600 and mode(folder / ".alert-good.json") == 0o600
    assert mode(local / "prom" / "driftwatch_local.prom") == 0o644 and mode(local / "prom") == 0o755


# -- an unusable or full store ------------------------------------------------------


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A real 64 KiB filesystem, for a real ENOSPC."""
    mount = tmp_path / "tmpfs"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"SKIPPED LOUDLY: cannot mount a tmpfs here, so a full disk is untested: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(mount: Path, leave: int) -> None:
    """Fill the filesystem up to ``leave`` free bytes."""
    free = os.statvfs(mount).f_bavail * os.statvfs(mount).f_frsize
    (mount / "filler").write_bytes(b"x" * max(0, free - leave))


def test_a_full_store_still_alerts_and_reports_in_the_textfile(
    local: Path, tmpfs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = str(tmpfs / "snapshots")
    assert main(["snapshot", "local", "--label", "good", "--store", store]) == 0
    upgrade_sgl_kernel(local)
    fill(tmpfs, leave=4096)  # room for the store check, not for a snapshot (7 KiB)
    notify, sent = alert_program(local)
    capsys.readouterr()
    code, out, err = run(capsys, "check", "local", "--store", store, "--notify", notify, "--textfile", "prom")
    assert code == 1 and "Traceback" not in err
    [line] = [x for x in err.splitlines() if "error" in x or "not stored" in x]
    assert "not stored" in line and "No space left on device" in line
    assert [a["status"] for a in alerts(sent)] == ["drift"], "the drift was found: it must still be alerted"
    assert "sgl-kernel" in out
    metrics = samples(local / "prom" / "driftwatch_local.prom")
    assert up(metrics) == (1, 0, 0)
    assert metrics[("driftwatch_drift_changes", (("host", "local"), ("severity", "high")))] >= 1
    assert not [p for p in Path(store).rglob(".tmp-*")], "a failed write left its temp file"


def test_a_store_with_no_room_at_all_fails_before_connecting(
    local: Path, tmpfs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fill(tmpfs, leave=0)
    store = str(tmpfs / "snapshots")
    for argv in (["snapshot", "local"], ["check", "local", "--textfile", "prom"]):
        code, _, err = run(capsys, *argv, "--store", store)
        assert code == 1 and err.count("\n") == 1 and "Traceback" not in err, err
        assert f"snapshot store {store} cannot be written: No space left on device" in err
    assert up(samples(local / "prom" / "driftwatch_local.prom")) == (0, 0, 0)


@pytest.mark.parametrize(
    ("store", "message"),
    [("a-file", "is a file, not a folder"), ("snap\\u0000shots", "NUL"), ("a-file/snapshots", "is a file, not a folder")],
)
def test_an_unusable_store_path_is_one_line_and_a_textfile(
    local: Path, capsys: pytest.CaptureFixture[str], store: str, message: str
) -> None:
    (local / "a-file").write_text("not a folder\n")
    config = local / "driftwatch.toml"
    config.write_text(f'store = "{store}"\n' + config.read_text())
    for argv in (["snapshot", "local"], ["check", "local", "--textfile", "prom"]):
        code, _, err = run(capsys, *argv)
        assert code == 1 and err.count("\n") == 1 and message in err and "Traceback" not in err, (argv, err)
        assert "\x00" not in err
    assert up(samples(local / "prom" / "driftwatch_local.prom")) == (0, 0, 0)
    code, _, err = run(capsys, "show", "local@good")
    assert code == 1 and err.count("\n") == 1 and "Traceback" not in err


def test_a_read_only_store_is_one_line(local: Path, tmpfs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    subprocess.run(["mount", "-o", "remount,ro", str(tmpfs)], check=True)
    code, _, err = run(capsys, "check", "local", "--store", str(tmpfs / "snapshots"), "--textfile", "prom")
    assert code == 1 and "Read-only file system" in err and "Traceback" not in err
    assert up(samples(local / "prom" / "driftwatch_local.prom")) == (0, 0, 0)


def test_an_old_read_only_store_is_read_as_it_is_with_a_warning(
    tmp_path: Path, tmpfs: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    old = tmpfs / "snapshots" / "root_10.0.0.1_22"  # the old name of root@10.0.0.1:22
    old.mkdir(parents=True)
    (old / "20260219T100000.000000Z.json").write_text(snapshot("root@10.0.0.1:22").model_dump_json())
    subprocess.run(["mount", "-o", "remount,ro", str(tmpfs)], check=True)
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "list", "--json", "--store", str(tmpfs / "snapshots"))
    assert code == 0 and [row["host"] for row in json.loads(out)] == ["root_10.0.0.1_22"]
    assert "could not be upgraded (Read-only file system)" in err and err.count("\n") == 1
