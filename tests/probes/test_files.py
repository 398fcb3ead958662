"""The files probe on a real tree: globs, digests, quoting and the hash cache."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from driftwatch.collect import run_probe
from driftwatch.model import ProbeStatus
from driftwatch.probes.base import ProbeContext
from driftwatch.probes.files import FilesProbe
from driftwatch.settings import WatchSettings
from driftwatch.transport.local import LocalTransport


def collect(patterns: list[str], previous: dict | None = None, **watch: object) -> dict:
    ctx = ProbeContext(transport=LocalTransport(), watch=WatchSettings(files=patterns, **watch), previous=previous or {})
    record = run_probe(FilesProbe(), ctx)
    assert record.status is ProbeStatus.ok, record.error
    return record.facts


def make_tree(root: Path) -> None:
    (root / "srt" / "layers").mkdir(parents=True)
    (root / "srt" / "server_args.py").write_text("a = 1\n")
    (root / "srt" / "layers" / "attention.py").write_text("b = 2\n")
    (root / "srt" / "README.md").write_text("not python\n")


def test_recursive_glob_with_digest_size_mode(tmp_path: Path) -> None:
    make_tree(tmp_path)
    facts = collect([f"{tmp_path}/srt/**/*.py"])
    assert sorted(facts["files"]) == [f"{tmp_path}/srt/layers/attention.py", f"{tmp_path}/srt/server_args.py"]
    entry = facts["files"][f"{tmp_path}/srt/server_args.py"]
    assert entry["sha256"] == hashlib.sha256(b"a = 1\n").hexdigest()
    assert entry["size"] == 6 and entry["mode"] == "0644" and entry["error"] is None


def test_odd_file_name_is_hashed_and_runs_nothing(tmp_path: Path) -> None:
    odd = tmp_path / "odd name $(touch x).py"
    odd.write_text("c = 3\n")
    facts = collect([f"{tmp_path}/*.py"])
    assert facts["files"][str(odd)]["sha256"] == hashlib.sha256(b"c = 3\n").hexdigest()
    assert not (tmp_path / "x").exists() and not Path("x").exists()


def test_too_large_file_is_recorded_not_hashed(tmp_path: Path) -> None:
    (tmp_path / "big.bin").write_bytes(b"\0" * 4096)
    entry = collect([f"{tmp_path}/big.bin"], max_hash_bytes=1024)["files"][f"{tmp_path}/big.bin"]
    assert entry["sha256"] is None and entry["error"] == "not hashed: too large"


def test_max_files_truncates_explicitly(tmp_path: Path) -> None:
    for i in range(5):
        (tmp_path / f"f{i}.py").write_text(str(i))
    facts = collect([f"{tmp_path}/*.py"], max_files=3)
    assert len(facts["files"]) == 3 and facts["truncated"] is True


def test_hash_cache_reuses_unchanged_and_notices_same_size_same_mtime_rewrite(tmp_path: Path) -> None:
    make_tree(tmp_path)
    pattern = [f"{tmp_path}/srt/**/*.py"]
    first = collect(pattern)
    assert first["volatile"] == {"hashed": 2, "reused": 0}
    second = collect(pattern, previous=first)
    assert second["volatile"] == {"hashed": 0, "reused": 2}
    assert second["files"] == first["files"]
    # Rewrite with the same size and put the mtime back: only ctime betrays the change.
    target = tmp_path / "srt" / "server_args.py"
    stat = target.stat()
    target.write_text("z = 9\n")
    os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    third = collect(pattern, previous=second)
    assert third["volatile"] == {"hashed": 1, "reused": 1}
    assert third["files"][str(target)]["sha256"] == hashlib.sha256(b"z = 9\n").hexdigest()


def test_no_patterns_is_skipped() -> None:
    record = run_probe(FilesProbe(), ProbeContext(transport=LocalTransport(), watch=WatchSettings(files=[])))
    assert record.status is ProbeStatus.skipped
