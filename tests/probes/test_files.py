"""The files probe on a real tree: globs, digests, quoting and the hash cache."""

from __future__ import annotations

import glob
import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest

from driftwatch.collect import run_probe
from driftwatch.model import ProbeStatus
from driftwatch.probes.base import ProbeContext, load_script
from driftwatch.probes.files import FilesProbe
from driftwatch.settings import WatchSettings
from driftwatch.transport.local import LocalTransport
from tests.venvs import old_pythons


def collect(patterns: list[str], previous: dict | None = None, timeout: float = 10.0, **watch: object) -> dict:
    settings = WatchSettings(files=patterns, **watch)
    ctx = ProbeContext(transport=LocalTransport(), watch=settings, previous=previous or {}, timeout=timeout)
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


def test_hashing_stops_at_its_budget_and_the_probe_keeps_every_other_fact(tmp_path: Path) -> None:
    # 8 GiB to hash (sparse: no disk used) against a 2 s probe: the probe timed out whole
    # before, every file's facts lost with it. Now hashing stops at half the time left.
    (tmp_path / "a.py").write_text("a = 1\n")
    with open(tmp_path / "b.bin", "wb") as handle:
        handle.truncate(8 * 1024**3)
    (tmp_path / "c.py").write_text("c = 3\n")
    facts = collect([f"{tmp_path}/*"], timeout=2.0, max_hash_bytes=16 * 1024**3)
    files = facts["files"]
    assert files[f"{tmp_path}/a.py"]["sha256"] == hashlib.sha256(b"a = 1\n").hexdigest()
    for late in ("b.bin", "c.py"):  # in glob's order, after the budget ran out
        assert files[f"{tmp_path}/{late}"]["sha256"] is None
        assert files[f"{tmp_path}/{late}"]["error"] == "not hashed: out of time"
    assert files[f"{tmp_path}/b.bin"]["size"] == 8 * 1024**3  # its stat is still a fact
    assert facts["volatile"]["unhashed"] == 2


def test_max_files_truncates_explicitly(tmp_path: Path) -> None:
    for i in range(5):
        (tmp_path / f"f{i}.py").write_text(str(i))
    facts = collect([f"{tmp_path}/*.py"], max_files=3)
    assert len(facts["files"]) == 3 and facts["truncated"] is True


def test_hash_cache_reuses_unchanged_and_notices_same_size_same_mtime_rewrite(tmp_path: Path) -> None:
    make_tree(tmp_path)
    pattern = [f"{tmp_path}/srt/**/*.py"]
    first = collect(pattern)
    assert first["volatile"] == {"hashed": 2, "reused": 0, "unhashed": 0}
    second = collect(pattern, previous=first)
    assert second["volatile"] == {"hashed": 0, "reused": 2, "unhashed": 0}
    assert second["files"] == first["files"]
    # Rewrite with the same size and put the mtime back: only ctime betrays the change.
    target = tmp_path / "srt" / "server_args.py"
    stat = target.stat()
    target.write_text("z = 9\n")
    os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    third = collect(pattern, previous=second)
    assert third["volatile"] == {"hashed": 1, "reused": 1, "unhashed": 0}
    assert third["files"][str(target)]["sha256"] == hashlib.sha256(b"z = 9\n").hexdigest()


def test_no_patterns_is_skipped() -> None:
    record = run_probe(FilesProbe(), ProbeContext(transport=LocalTransport(), watch=WatchSettings(files=[])))
    assert record.status is ProbeStatus.skipped


def make_loops(root: Path, loops: int) -> None:
    """The tree of make_tree (3 .py files) plus one more, and directory symlinks back up it."""
    make_tree(root)
    (root / "srt" / "layers" / "moe.py").write_text("c = 3\n")
    (root / "srt" / "layers" / "up").symlink_to("..")
    if loops > 1:
        (root / "srt" / "layers" / "top").symlink_to("../..")


def test_one_symlink_loop_lists_each_file_once(tmp_path: Path) -> None:
    make_loops(tmp_path, 1)
    facts = collect([f"{tmp_path}/srt/**/*.py"], timeout=20)
    assert sorted(facts["files"]) == [f"{tmp_path}/srt/layers/attention.py", f"{tmp_path}/srt/layers/moe.py",
                                      f"{tmp_path}/srt/server_args.py"]
    assert facts["truncated"] is False and facts["truncated_reason"] is None


def test_two_symlink_loops_and_max_files_bound_the_walk(tmp_path: Path) -> None:
    make_loops(tmp_path, 2)
    facts = collect([f"{tmp_path}/**"], timeout=20)
    assert len(facts["files"]) == 4 and facts["truncated"] is False
    facts = collect([f"{tmp_path}/**"], max_files=2, timeout=20)
    assert len(facts["files"]) == 2 and facts["truncated"] is True
    assert facts["truncated_reason"] == "more files matched than max_files = 2"


def test_walk_stops_after_its_entry_budget_and_says_so(tmp_path: Path) -> None:
    (tmp_path / "noise").mkdir()
    for i in range(60):
        (tmp_path / "noise" / f"n{i}.txt").write_text("")
    (tmp_path / "noise" / "deep").mkdir()
    (tmp_path / "noise" / "deep" / "x.py").write_text("")
    facts = collect([f"{tmp_path}/**/*.py"], max_files=1, timeout=20)  # 50 entries per file allowed
    assert facts["truncated"] is True and facts["files"] == {}
    assert facts["truncated_reason"] == "the walk stopped after reading 50 directory entries"


def test_walk_finds_what_glob_finds_without_loops(tmp_path: Path) -> None:
    make_tree(tmp_path)
    (tmp_path / "srt" / ".hidden").mkdir()
    (tmp_path / "srt" / ".hidden" / "h.py").write_text("")
    (tmp_path / "srt" / ".dot.py").write_text("")
    (tmp_path / "srt" / "linked").symlink_to(tmp_path / "srt" / "layers")  # not a loop: followed, as glob does
    (tmp_path / "srt" / "broken.py").symlink_to(tmp_path / "nowhere")
    (tmp_path / "srt" / "a1.py").write_text("")
    (tmp_path / "srt" / "b2.py").write_text("")
    for pattern in ["srt/**/*.py", "srt/**", "srt/*.py", "srt/.*.py", "srt/[ab]?.py", "*/layers/*.py", "srt/server_args.py",
                    "srt/**/layers/**/*.py", "srt/nothing/*.py"]:
        matched = glob.glob(f"{tmp_path}/{pattern}", recursive=True)
        expected = {p for p in matched if os.path.isfile(p) or not os.path.exists(p)}  # files and broken links
        facts = collect([f"{tmp_path}/{pattern}"])
        assert set(facts["files"]) == expected, pattern
    assert facts["files"] == {} and facts["truncated"] is False


@pytest.mark.parametrize("python", old_pythons() or [pytest.param(None, marks=pytest.mark.skip("no python3.8/3.9 here"))])
def test_walker_runs_on_old_pythons(tmp_path: Path, python: str) -> None:
    make_loops(tmp_path, 2)
    request = {"patterns": [f"{tmp_path}/**/*.py"], "max_files": 10, "max_entries": 500, "max_hash_bytes": 1 << 20, "cache": {}}
    out = subprocess.run([python, "-I", "-S", "-c", load_script("files_collect.py")], input=json.dumps(request).encode(),
                         capture_output=True, check=True, timeout=30).stdout
    assert len(json.loads(out)["files"]) == 3


def snapshot_of_bad_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                         *, literal_too: bool = False) -> str:
    """`snapshot local --json` of a tree holding bad<0xff>.py (x = 1) and, with
    ``literal_too``, a file literally named bad\\xff.py (y = 2); its stdout."""
    from driftwatch.cli import main

    (tmp_path / "src").mkdir()
    with open(os.fsencode(tmp_path / "src") + b"/bad\xff.py", "wb") as handle:
        handle.write(b"x = 1\n")
    if literal_too:
        (tmp_path / "src" / "bad\\xff.py").write_text("y = 2\n")
    (tmp_path / "driftwatch.toml").write_text(f'[watch]\nfiles = ["{tmp_path}/src/*.py"]\nprocesses = []\n')
    monkeypatch.chdir(tmp_path)
    assert main(["snapshot", "local", "--json"]) in (0, 3)
    return capsys.readouterr().out


def test_a_file_name_that_is_not_utf8_is_stored_and_printed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A path with a byte that is not UTF-8 came back as a lone surrogate; the snapshot then
    # could not be stored or printed (a traceback from the JSON encoder).
    out = snapshot_of_bad_name(tmp_path, monkeypatch, capsys)
    assert "bad\\\\xff.py" in out  # the byte, shown as \xff (escaped once more by JSON)


def test_a_name_that_is_not_utf8_and_its_literal_spelling_are_two_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # bad<0xff>.py is stored as "bad\\xff.py", which is also how a file named with a
    # backslash, x, f, f is spelled: one of the two was silently dropped, and the other's
    # digest compared against it.
    [entry] = json.loads(snapshot_of_bad_name(tmp_path, monkeypatch, capsys, literal_too=True))
    files = entry["snapshot"]["probes"]["files"]["facts"]["files"]
    literal, escaped = f"{tmp_path}/src/bad\\xff.py", f"{tmp_path}/src/bad\\xff.py (name not UTF-8)"
    assert sorted(files) == [literal, escaped]
    assert files[literal]["sha256"] == hashlib.sha256(b"y = 2\n").hexdigest()
    assert files[escaped]["sha256"] == hashlib.sha256(b"x = 1\n").hexdigest()


def test_the_walk_says_where_home_expanded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "x.py").write_text("x = 1\n")
    facts = collect(["~/x.py"])
    assert facts["home"] == str(tmp_path) and list(facts["files"]) == [str(tmp_path / "x.py")]
