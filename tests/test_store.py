"""The snapshot store: naming, atomic writes, refs and clear errors for bad files."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from driftwatch.errors import StoreError, UserError
from driftwatch.store import SnapshotStore, host_dir_name, load_snapshot, resolve_ref
from tests.builders import snapshot


@pytest.fixture
def store(tmp_path: Path) -> SnapshotStore:
    return SnapshotStore(tmp_path / "snapshots")


def test_save_names_sort_by_time_and_round_trip(store: SnapshotStore) -> None:
    late = store.save(snapshot(minutes=5))
    early = store.save(snapshot(minutes=1))
    assert store.paths("gpu01") == [early, late]
    assert load_snapshot(late) == snapshot(minutes=5)
    assert not [p for p in late.parent.iterdir() if p.name.startswith(".tmp-")]


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
    assert all(load_snapshot(p).host.name == "gpu01" for p in paths)


def test_host_names_become_safe_folder_names() -> None:
    assert host_dir_name("root@10.1.230.174:2222") == "root_10.1.230.174_2222"
    assert host_dir_name("../../etc") == "_.._etc"


def test_refs_latest_back_label_timestamp_and_file(store: SnapshotStore) -> None:
    good = store.save(snapshot(minutes=0, labels=["good"]))
    middle = store.save(snapshot(minutes=1))
    latest = store.save(snapshot(minutes=2))
    assert resolve_ref(store, "gpu01@latest").path == latest
    assert resolve_ref(store, "gpu01").path == latest
    assert resolve_ref(store, "gpu01@~1").path == middle
    assert resolve_ref(store, "gpu01@good").path == good
    assert resolve_ref(store, "gpu01@2026-02-19T10:01").path == middle
    assert resolve_ref(store, str(latest)).path == latest


def test_unknown_label_lists_the_labels_that_exist(store: SnapshotStore) -> None:
    store.save(snapshot(labels=["good"]))
    with pytest.raises(UserError, match=r"labels: good"):
        resolve_ref(store, "gpu01@bad")
    with pytest.raises(UserError, match=r"only 1 snapshot"):
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
    snap = load_snapshot(path)
    store.rewrite(path, snap.model_copy(update={"labels": ["good"]}))
    assert json.loads(path.read_text())["labels"] == ["good"]
