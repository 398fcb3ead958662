"""The logs probe on real files: newest match, bounded reads of huge and binary logs."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from driftwatch.collect import run_probe
from driftwatch.model import ProbeStatus
from driftwatch.probes import logs as logs_module
from driftwatch.probes.base import ProbeContext
from driftwatch.probes.logs import LogsProbe, part_size
from driftwatch.settings import WatchSettings
from driftwatch.transport import DEFAULT_MAX_OUTPUT
from driftwatch.transport.local import LocalTransport

ARGS = (
    "[2026-02-19 10:00:00] server_args=ServerArgs(model_path='/models/DeepSeek-V3', mem_fraction_static={}, "
    "tp_size=8, chunked_prefill_size=8192)\n"
)
LOADED = "[2026-02-19 10:02:11 TP{}] Load weight end. type=DeepseekV3ForCausalLM, avail mem=21.70 GB, mem usage=71.73 GB.\n"
FAILED = "[2026-02-19 10:02:12 TP{0}] Scheduler hit an exception: Traceback\nRuntimeError: Not enough memory. Please try to increase --mem-fraction-static.\n"
READY = "[2026-02-19 10:02:42] The server is fired up and ready to roll!\n"


def collect(patterns: list[str], timeout: float = 10.0) -> dict:
    ctx = ProbeContext(transport=LocalTransport(), watch=WatchSettings(logs=patterns), timeout=timeout)
    record = run_probe(LogsProbe(), ctx)
    assert record.status is ProbeStatus.ok, record.error
    return record.facts["logs"]


def write(path: Path, text: str, mtime: float) -> None:
    path.write_text(text)
    os.utime(path, (mtime, mtime))


def test_newest_matching_file_is_parsed(tmp_path: Path) -> None:
    now = time.time()
    write(tmp_path / "a.log", ARGS.format(0.88) + LOADED.format(0) + READY, now - 300)
    write(tmp_path / "b.log", ARGS.format(0.55) + LOADED.format(0) + FAILED.format(0), now - 10)
    write(tmp_path / "c.log", ARGS.format(0.70), now - 100)
    (tmp_path / "newer.txt").write_text("not matched by the glob")
    entry = collect([f"{tmp_path}/*.log"])[f"{tmp_path}/*.log"]
    assert entry["path"] == str(tmp_path / "b.log") and entry["volatile"]["size"] == (tmp_path / "b.log").stat().st_size
    assert entry["kind"] == "sglang" and entry["key_args"]["mem_fraction_static"] == 0.55
    assert entry["memory"]["TP0"]["avail_mem_after_load_gb"] == 21.70 and entry["ready"] is False
    assert [(e["kind"], e["detail"]) for e in entry["errors"]] == [
        ("kv-budget", "not_enough_memory"), ("engine-start", "startup_exception")]
    # A small file is read once: head and tail do not count the same error twice.
    assert [e["count"] for e in entry["errors"]] == [1, 1]
    assert entry["volatile"] == {"size": 397, "mtime": pytest.approx(now - 10), "skipped_bytes": 0}


def test_multi_gb_sparse_log_is_read_at_both_ends_quickly(tmp_path: Path) -> None:
    path = tmp_path / "server.log"
    tail = "".join(FAILED.format(rank) for rank in range(8))
    with open(path, "wb") as handle:
        handle.write((ARGS.format(0.55) + LOADED.format(3)).encode())
    os.truncate(path, 3 * 1024**3)  # as `truncate -s 3G`: sparse, nothing to read from disk
    with open(path, "r+b") as handle:
        handle.seek(0, os.SEEK_END)
        handle.write(b"\n" + tail.encode())
    start = time.monotonic()
    entry = collect([str(path)])[str(path)]
    elapsed = time.monotonic() - start
    assert elapsed < 1.0, f"took {elapsed:.2f}s"
    assert entry["volatile"]["size"] == path.stat().st_size > 3 * 1024**3
    assert entry["key_args"]["mem_fraction_static"] == 0.55 and entry["memory"]["TP3"]["avail_mem_after_load_gb"] == 21.70
    every_rank = [f"TP{rank}" for rank in range(8)]
    assert [{k: v for k, v in e.items() if k != "mentions"} for e in entry["errors"]] == [
        {"kind": "kv-budget", "detail": "not_enough_memory", "count": 8, "ranks": every_rank,
         "message": "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."},
        {"kind": "engine-start", "detail": "startup_exception", "count": 8, "ranks": every_rank,
         "message": "Scheduler hit an exception: Traceback"},
    ]  # fmt: skip
    assert entry["volatile"]["skipped_bytes"] > 3 * 1024**3 - 5 * 1024**2


def test_binary_garbage_is_ok_and_recognises_nothing(tmp_path: Path) -> None:
    path = tmp_path / "garbage.log"
    path.write_bytes(os.urandom(3 * 1024 * 1024) + b"\x00\xff\xfe" * 100_000 + os.urandom(2 * 1024 * 1024))
    entry = collect([str(path)])[str(path)]
    assert entry["kind"] is None and entry["errors"] == [] and entry["path"] == str(path)


def test_no_logs_configured_is_skipped() -> None:
    record = run_probe(LogsProbe(), ProbeContext(transport=LocalTransport(), watch=WatchSettings(logs=[])))
    assert record.status is ProbeStatus.skipped


def test_glob_without_match_is_an_entry_with_error(tmp_path: Path) -> None:
    write(tmp_path / "ok.log", ARGS.format(0.88) + READY, time.time())
    facts = collect([f"{tmp_path}/missing/*.log", f"{tmp_path}/*.log"])
    assert facts[f"{tmp_path}/missing/*.log"] == {"error": "no file matches"}
    assert facts[f"{tmp_path}/*.log"]["ready"] is True


def test_tilde_expands_on_the_target_and_odd_names_run_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    odd = tmp_path / "logs" / "odd $(touch pwned) 'x'.log"
    odd.parent.mkdir()
    write(odd, ARGS.format(0.88), time.time())
    entry = collect(["~/logs/*.log"])["~/logs/*.log"]
    assert entry["path"] == str(odd) and entry["key_args"]["mem_fraction_static"] == 0.88
    assert not (tmp_path / "logs" / "pwned").exists() and not Path("pwned").exists()


def test_lines_cut_by_the_read_bounds_are_not_misread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logs_module, "MAX_PART", 4096)
    path = tmp_path / "server.log"
    # The head bound falls inside a memory line (its number would read "2" or "21.7"),
    # the tail bound inside an error line; the args line itself is long and gets cut too.
    head = ARGS.format(0.88).replace(")", ", " + ", ".join(f"k{i}={i}" for i in range(800)) + ")")
    body = "x" * 100_000 + "\n" + LOADED.format(5) * 2000 + FAILED.format(1)
    path.write_text(head + body)
    entry = collect([str(path)])[str(path)]
    assert entry["server_args_truncated"] is True and entry["key_args"]["mem_fraction_static"] == 0.88
    assert entry["memory"]["TP5"]["avail_mem_after_load_gb"] == 21.70
    assert entry["errors"][0]["count"] == 1


def test_budget_keeps_every_reply_inside_the_transport_cap() -> None:
    assert part_size(1) == 2 * 1024 * 1024
    for n in (1, 2, 3, 8, 50, 1000):
        assert 2 * part_size(n) * n <= DEFAULT_MAX_OUTPUT - 1024 * 1024


def test_unreadable_and_non_utf8_names(tmp_path: Path) -> None:
    odd = tmp_path / os.fsdecode(b"srv-\xff.log")
    write(odd, ARGS.format(0.88), time.time())
    entry = collect([f"{tmp_path}/*.log"])[f"{tmp_path}/*.log"]
    assert entry["path"] == f"{tmp_path}/srv-\ufffd.log" and entry["key_args"]["mem_fraction_static"] == 0.88
    entry["path"].encode("utf-8")  # storable as UTF-8 JSON
    if os.geteuid() != 0:  # root reads anything
        odd.chmod(0)
        assert "error" in collect([f"{tmp_path}/*.log"])[f"{tmp_path}/*.log"]


def test_a_fifo_that_matches_is_never_opened(tmp_path: Path) -> None:
    write(tmp_path / "real.log", ARGS.format(0.88), time.time() - 60)
    os.mkfifo(tmp_path / "pipe.log")  # newest match, but opening it would block forever
    entry = collect([f"{tmp_path}/*.log"], timeout=5)[f"{tmp_path}/*.log"]
    assert entry["path"] == str(tmp_path / "real.log")
