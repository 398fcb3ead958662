"""The git probe against real repositories."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from driftwatch.collect import run_probe
from driftwatch.model import ProbeStatus
from driftwatch.probes.base import ProbeContext
from driftwatch.probes.git import GitProbe, parse_repo
from driftwatch.settings import WatchSettings
from driftwatch.transport.local import LocalTransport


def git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@x",
           "PATH": "/usr/bin:/bin", "HOME": str(repo)}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "sglang"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "server_args.py").write_text("mem_fraction_static = None\n")
    git(path, "add", ".")
    git(path, "commit", "-q", "-m", "Initial server args")
    git(path, "tag", "v0.5.6")
    return path


def collect(*repos: str) -> dict:
    record = run_probe(GitProbe(), ProbeContext(transport=LocalTransport(), watch=WatchSettings(repos=list(repos))))
    assert record.status is ProbeStatus.ok, record.error
    return record.facts["repos"]


def test_clean_repo_reports_head_branch_describe_subject(repo: Path) -> None:
    facts = collect(str(repo))[str(repo)]
    assert facts["head"] == git(repo, "rev-parse", "HEAD").strip()
    assert facts["branch"] == "main"
    assert facts["describe"] == "v0.5.6"
    assert facts["subject"] == "Initial server args"
    assert facts["date"].startswith("20")
    assert facts["dirty"] == [] and facts["diff_sha256"] is None


def test_edit_left_differs_from_edit_reverted(repo: Path) -> None:
    target = repo / "server_args.py"
    original = target.read_text()
    target.write_text(original + "print('debug')\n")
    edited = collect(str(repo))[str(repo)]
    assert edited["dirty"] == ["server_args.py"]
    assert edited["diff_sha256"]
    target.write_text(original + "print('other debug')\n")
    assert collect(str(repo))[str(repo)]["diff_sha256"] != edited["diff_sha256"]
    target.write_text(original)
    reverted = collect(str(repo))[str(repo)]
    assert reverted["dirty"] == [] and reverted["diff_sha256"] is None


def test_untracked_file_makes_tree_dirty(repo: Path) -> None:
    (repo / "scratch.py").write_text("x = 1\n")
    assert collect(str(repo))[str(repo)]["dirty"] == ["scratch.py"]


def test_missing_repo_is_an_error_entry_not_a_failed_probe(repo: Path, tmp_path: Path) -> None:
    repos = collect(str(repo), str(tmp_path / "nope"))
    assert repos[str(repo)]["head"]
    assert repos[str(tmp_path / "nope")]["error"]


def test_path_with_shell_syntax_runs_nothing(tmp_path: Path) -> None:
    odd = tmp_path / "odd name $(touch pwned)"
    odd.mkdir()
    git(odd, "init", "-q")
    repos = collect(str(odd))
    assert repos[str(odd)]["path"] == str(odd)
    assert not list(tmp_path.rglob("pwned")) and not Path("pwned").exists()


def test_tilde_expands_on_the_target(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(repo.parent))
    assert collect("~/sglang")["~/sglang"]["path"] == str(repo)


def test_no_repos_configured_is_skipped() -> None:
    record = run_probe(GitProbe(), ProbeContext(transport=LocalTransport(), watch=WatchSettings(repos=[])))
    assert record.status is ProbeStatus.skipped


def test_parse_repo_error_line() -> None:
    assert parse_repo("@@error fatal: not a git repository\n") == {"error": "fatal: not a git repository"}


def test_a_failing_git_status_is_an_error_not_a_clean_tree(repo: Path) -> None:
    # A damaged index makes `git status` fail: that says nothing about the tree.
    (repo / "server_args.py").write_text("print('debug')\n")
    (repo / ".git" / "index").write_bytes(b"DIRC garbage")
    facts = collect(str(repo))[str(repo)]
    assert facts["error"] and "git status failed" in facts["error"]
    assert "dirty" not in facts and "head" not in facts


def test_repo_without_a_commit_lists_its_files(tmp_path: Path) -> None:
    path = tmp_path / "new"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "a.py").write_text("x = 1\n")
    facts = collect(str(path))[str(path)]
    assert facts["error"] is None and facts["head"] is None and facts["dirty"] == ["a.py"]
    assert facts["diff_sha256"]
