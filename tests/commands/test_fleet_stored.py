"""fleet from the store, through the worker processes a big fleet gets (spawned here for 4 hosts)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from driftwatch.commands import fleet_stored
from driftwatch.commands.fleet_stored import gather_stored
from driftwatch.diff import DiffOptions
from driftwatch.fleet.compare import compare_gathered
from driftwatch.model import utcnow
from driftwatch.store import SnapshotStore
from tests.diff.builders import make_snapshot
from tests.fleet.builders import host_facts, old_nccl
from tests.s3 import S3Server


@pytest.mark.parametrize("medium", ["folder", "s3"])
def test_worker_processes_find_the_odd_host_and_skip_what_they_cannot_read(
    medium: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    monkeypatch.setattr(fleet_stored, "PROCESSES_FROM", 2)  # workers from 2 hosts on, not 64
    url = str(tmp_path / "snapshots")
    if medium == "s3":
        s3: S3Server = request.getfixturevalue("s3")
        s3.use(monkeypatch)
        url = f"s3://{s3.bucket()}/fleet"
    store = SnapshotStore(url)
    now = utcnow()
    for n in range(1, 5):
        facts = host_facts(n)
        if n == 2:
            old_nccl(facts)
        snap = make_snapshot(host=f"gpu0{n}", **facts)
        store.save(snap.model_copy(update={"taken_at": now - timedelta(minutes=n)}))
    # gpu03's newest file is torn: its older one is compared instead.
    store.save(make_snapshot(host="gpu03", **host_facts(3)).model_copy(update={"taken_at": now}))
    torn = store.paths("gpu03")[-1]
    store.backend.replace(torn, b'{"schema_version": 1, "host": {"na')
    found = gather_stored(store, store.inventory(), DiffOptions(), max_age=timedelta(hours=1), now=now)
    assert [h.name for h in found.gathered.hosts] == ["gpu01", "gpu02", "gpu03", "gpu04"]
    assert found.stale == [] and found.left_out == []
    result = compare_gathered(found.gathered)
    assert result.summary["outlier_hosts"] == ["gpu02"]
    [warning] = store.take_warnings()
    assert str(torn) in warning and "skipped unreadable snapshot" in warning
