"""The snapshot store: naming, atomic writes, refs and clear errors for bad files.

Every test taking the ``store`` fixture runs twice: on a local folder, and on a real S3
endpoint (moto's server on 127.0.0.1, tests/s3.py) through s3fs.
"""

from __future__ import annotations

import json
import os
import string
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from driftwatch.cron.alerts import AlertState
from driftwatch.errors import StoreError, UserError
from driftwatch.cron.textfile import write_textfile
from driftwatch.store import (
    LAYOUT_MARK,
    Location,
    SnapshotStore,
    host_dir_name,
    host_from_dir_name,
    load_snapshot,
    resolve_ref,
)
from tests.builders import snapshot
from tests.s3 import S3Server


@pytest.fixture(params=["folder", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SnapshotStore:
    if request.param == "folder":
        return SnapshotStore(tmp_path / "snapshots")
    s3: S3Server = request.getfixturevalue("s3")
    s3.use(monkeypatch)
    return SnapshotStore(f"s3://{s3.bucket()}/fleet/driftwatch")


def is_s3(store: SnapshotStore) -> bool:
    return str(store.root).startswith("s3://")


def plant(store: SnapshotStore, host: str, name: str, data: bytes) -> Location:
    """A file written into the store behind its back (a torn copy, a foreign file)."""
    location = store.location(host, name)
    store.backend.replace(location, data)
    return location


def test_save_names_sort_by_time_and_round_trip(store: SnapshotStore) -> None:
    late = store.save(snapshot(minutes=5))
    early = store.save(snapshot(minutes=1))
    assert store.paths("gpu01") == [early, late]
    assert store.load(late) == snapshot(minutes=5)
    assert str(late).rsplit("/", 1)[-1].startswith("20260219T100500.000000Z")
    if not is_s3(store):
        assert not [p for p in Path(late).parent.iterdir() if p.name.startswith(".tmp-")]


def test_order_is_the_snapshots_own_time_never_the_upload_time(store: SnapshotStore) -> None:
    # A node whose clock ran ahead then was corrected uploads its older-stamped snapshot last.
    written = [store.save(snapshot(minutes=m)) for m in (3, 1, 2, 0)]
    assert [store.load(p).taken_at.minute for p in store.paths("gpu01")] == [0, 1, 2, 3]
    assert resolve_ref(store, "gpu01@latest").path == written[0]


def test_same_moment_twice_keeps_both(store: SnapshotStore) -> None:
    first, second = store.save(snapshot()), store.save(snapshot())
    assert first != second and len(store.paths("gpu01")) == 2


def test_concurrent_writers_never_lose_or_corrupt(store: SnapshotStore) -> None:
    threads = [threading.Thread(target=store.save, args=(snapshot(),)) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    paths = store.paths("gpu01")
    assert len(paths) == 16
    assert all(store.load(p).host.name == "gpu01" for p in paths)


def test_host_folder_names_are_readable_and_never_shared(store: SnapshotStore) -> None:
    assert host_dir_name("gpu01") == "gpu01"
    assert host_dir_name("node-1.example.com") == "node-1.example.com"
    assert host_dir_name("root@10.1.230.174:2222") == "root%4010.1.230.174%3A2222"
    assert host_dir_name("../../etc") == "%2E.%2F..%2Fetc"
    assert {host_dir_name(h) for h in (".", "..", ".hidden")} == {"%2E", "%2E.", "%2Ehidden"}
    for host in ("a/b", "a_b", "a%2Fb", "root@10.0.0.1:22"):
        store.save(snapshot(host))
    assert store.hosts() == ["a%2Fb", "a/b", "a_b", "root@10.0.0.1:22"]
    assert [store.load(p).host.name for p in store.paths("a/b")] == ["a/b"]
    assert [store.load(p).host.name for p in store.paths("a_b")] == ["a_b"]


@given(st.text(min_size=1, max_size=40))
def test_host_folder_names_are_injective_safe_and_decode_back(host: str) -> None:
    name = host_dir_name(host)
    assert host_from_dir_name(name) == host
    assert set(name) <= set(string.ascii_letters + string.digits + "._-%") and not name.startswith(".")


def test_an_old_store_is_upgraded_once_to_the_new_names(tmp_path: Path) -> None:
    # Written by driftwatch before folder names were encoded: `a/b` and `a_b` shared `a_b`.
    root = tmp_path / "snapshots"
    old = {
        "root_10.0.0.1_22": [snapshot("root@10.0.0.1:22", labels=["good"]), snapshot("root@10.0.0.1:22", minutes=1)],
        "a_b": [snapshot("a/b"), snapshot("a_b", minutes=1), snapshot("a/b", minutes=2)],
    }
    for folder, snaps in old.items():
        (root / folder).mkdir(parents=True)
        for snap in snaps:
            (root / folder / f"{snap.taken_at:%Y%m%dT%H%M%S.%fZ}.json").write_text(snap.model_dump_json())
    (root / "root_10.0.0.1_22" / ".alert-good.json").write_text('{"fingerprint": "abc"}')
    (root / "a_b" / "20990101T000000.000000Z.json").write_text("{torn")

    store = SnapshotStore(root)
    assert store.hosts() == ["a/b", "a_b", "root@10.0.0.1:22"]
    assert resolve_ref(store, "root@10.0.0.1:22@good").snapshot.labels == ["good"]
    assert [s.snapshot.host.name for s in store.readable(store.paths("a/b"))] == ["a/b", "a/b"]
    assert [s.snapshot.host.name for s in store.readable(store.paths("a_b"))] == ["a_b"]
    assert AlertState.for_host(store, "root@10.0.0.1:22", "good").last() == "abc"
    assert not list((root / "root_10.0.0.1_22").glob("*.json"))
    assert (root / "a_b" / "20990101T000000.000000Z.json").exists(), "an unreadable file cannot be attributed: it stays"
    assert (root / LAYOUT_MARK).is_file()


def test_refs_latest_back_label_timestamp_and_file(store: SnapshotStore) -> None:
    good = store.save(snapshot(minutes=0, labels=["good"]))
    middle = store.save(snapshot(minutes=1))
    latest = store.save(snapshot(minutes=2))
    assert resolve_ref(store, "gpu01@latest").path == latest
    assert resolve_ref(store, "gpu01@~1").path == middle
    assert resolve_ref(store, "gpu01@good").path == good
    assert resolve_ref(store, "gpu01@2026-02-19T10:01").path == middle
    assert resolve_ref(store, str(latest)).path == latest


def test_unknown_label_lists_the_labels_that_exist(store: SnapshotStore) -> None:
    store.save(snapshot(labels=["good"]))
    with pytest.raises(UserError, match=r"labels: good"):
        resolve_ref(store, "gpu01@bad")
    with pytest.raises(UserError, match=r"only 1 readable snapshot"):
        resolve_ref(store, "gpu01@~3")
    with pytest.raises(UserError, match=r"no snapshots of 'gpu99'"):
        resolve_ref(store, "gpu99@latest")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"schema_version": 1, "host": {"na', "corrupt or truncated"),
        (b'{"hello": "world"}', "no schema_version"),
        (b'{"schema_version": 99}', "newer driftwatch"),
        (b'{"schema_version": 1, "host": 5}', "not a valid driftwatch snapshot"),
        (b"\xff\xfe binary", "corrupt or truncated"),
    ],
)
def test_bad_files_name_the_file(tmp_path: Path, content: bytes, message: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    with pytest.raises(StoreError, match=message) as info:
        load_snapshot(bad)
    assert str(bad) in str(info.value)


def test_rewrite_changes_labels_atomically(store: SnapshotStore) -> None:
    path = store.save(snapshot())
    snap = store.load(path)
    store.rewrite(path, snap.model_copy(update={"labels": ["good"]}))
    assert json.loads(store.backend.read(path))["labels"] == ["good"]
    assert store.paths("gpu01") == [path]


def test_state_and_textfile_names_use_the_same_encoding(store: SnapshotStore, tmp_path: Path) -> None:
    for host in ("a/b", "a_b"):
        AlertState.for_host(store, host, "good").remember(f"fp-{host}")
        write_textfile(tmp_path / "prom", host, snapshot=None, result=None)
    assert AlertState.for_host(store, "a/b", "good").last() == "fp-a/b"
    assert AlertState.for_host(store, "a_b", "good").last() == "fp-a_b"
    assert sorted(p.name for p in (tmp_path / "prom").iterdir()) == ["driftwatch_a%2Fb.prom", "driftwatch_a_b.prom"]


def broken(store: SnapshotStore, host: str, stamp: str) -> Location:
    return plant(store, host, f"{stamp}.json", b'{"schema_version": 1, "truncat')


def test_refs_skip_unreadable_files_and_name_each_once(store: SnapshotStore) -> None:
    good = store.save(snapshot(minutes=0, labels=["good"]))
    middle = store.save(snapshot(minutes=1))
    latest = store.save(snapshot(minutes=2))
    newest_bad = broken(store, "gpu01", "20260219T100300.000000Z")
    between_bad = broken(store, "gpu01", "20260219T100130.000000Z")
    assert resolve_ref(store, "gpu01@latest").path == latest
    assert resolve_ref(store, "gpu01@~1").path == middle
    assert resolve_ref(store, "gpu01@good").path == good
    assert resolve_ref(store, "gpu01@2026-02-19T10:01").path == middle
    assert store.latest("gpu01").path == latest and store.find_label("gpu01", "good").path == good
    warnings = store.take_warnings()
    assert [str(newest_bad) in w for w in warnings] == [True, False]
    assert str(between_bad) in warnings[1] and "skipped unreadable snapshot" in warnings[0]
    assert store.take_warnings() == [] and len(store.unreadable("gpu01")) == 2
    with pytest.raises(UserError, match="2 unreadable file"):
        resolve_ref(store, "gpu01@2026-02-19T10:03")
    with pytest.raises(StoreError, match="truncat|corrupt") as info:
        resolve_ref(store, str(newest_bad))  # named explicitly: an error naming it
    assert str(newest_bad) in str(info.value)


def test_a_write_cleans_temp_files_of_killed_writers(tmp_path: Path) -> None:
    store = SnapshotStore(tmp_path / "snapshots")
    folder = tmp_path / "snapshots" / "gpu01"
    store.save(snapshot())
    stale, fresh = folder / ".tmp-killed.part", folder / ".tmp-writing.part"
    for path in (stale, fresh):
        path.write_text("half a snapshot")
    os.utime(stale, (time.time() - 120, time.time() - 120))
    store.save(snapshot(minutes=1))
    assert not stale.exists() and fresh.exists(), "only a temp file over a minute old is a dead writer's"


def test_a_snapshot_stored_before_full_redaction_is_redacted_when_read(tmp_path: Path) -> None:
    from driftwatch.store import load_snapshot
    from tests.diff.builders import make_snapshot

    hook = "https://hooks.slack.com/services/T000/B000/" + "X" * 24
    dsn = "postgres://app:hunter2@db.internal:5432/app"
    server = {"kind": "sglang", "entry": "sglang.launch_server", "model": "/m",
              "argv": ["python3", "-m", "sglang.launch_server", "--webhook-url", hook],
              "args": {"webhook_url": hook}, "env": {"SGLANG_WEBHOOK_URL": hook}, "libraries": [], "volatile": {}}
    processes = {"servers": {"sglang.launch_server": server}, "truncated": False,
                 "login_env": {"SENTRY_DSN": dsn}, "login_env_error": None}
    old = make_snapshot(processes=processes).model_dump(mode="json")
    old["schema_version"] = 1  # what driftwatch wrote before these rules
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old))
    loaded = load_snapshot(path)
    text = loaded.model_dump_json()
    assert "T000/B000" not in text and "hunter2" not in text
    assert "https://hooks.slack.com/" in text and "db.internal" in text  # the host stays visible
    assert loaded.schema_version == 2


def test_an_old_python_probe_loses_url_credentials_only(tmp_path: Path) -> None:
    from driftwatch.store import load_snapshot
    from tests.diff.builders import baseline, dists, make_snapshot

    facts = baseline()
    dists(facts)["sglang"].update(direct_url="https://builduser:s3cr3t@git.example.com/sglang.git")
    dists(facts)["torch"]["requires"].append("triton @ https://ci:tok@pypi.example.com/triton.whl")
    old = make_snapshot(**facts).model_dump(mode="json")
    old["schema_version"] = 1
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old))
    loaded = load_snapshot(path)
    text = loaded.model_dump_json()
    assert "s3cr3t" not in text and "ci:tok" not in text and "git.example.com" in text
    assert loaded.facts("files") == make_snapshot(**baseline()).facts("files")
