"""Huge values where a time, an age or a count goes: a realistic "forever" is accepted as
never, and nothing ends in an OverflowError or ValueError traceback. Against the real sshd
host (`testhost`, a real venv whose sgl-kernel moved)."""

from __future__ import annotations

from pathlib import Path

import pytest

from driftwatch.cli import main
from driftwatch.store import SnapshotStore
from tests.builders import snapshot
from tests.test_cli_check import gpu_host, set_sgl_kernel  # noqa: F401  (gpu_host: a fixture)
from tests.test_cli_store import run


@pytest.fixture
def drifted(gpu_host: Path) -> Path:  # noqa: F811
    set_sgl_kernel(gpu_host, "0.3.17")
    assert main(["snapshot", "testhost"]) == 0
    return gpu_host


@pytest.mark.parametrize("until", ["9999-12-31", "99999999d", "9999-12-31T23:59:59+00:00"])
def test_accept_until_forever_is_never(drifted: Path, capsys: pytest.CaptureFixture[str], until: str) -> None:
    capsys.readouterr()
    code, out, err = run(capsys, "accept", "testhost", "sgl-kernel", "--reason", "pinned on purpose", "--until", until)
    assert code == 0 and "Traceback" not in err, err
    assert "9999-12-31" in out
    code, out, err = run(capsys, "diff", "testhost@good", "testhost@latest")
    assert "accepted by " in out and "pinned on purpose" in out and "Traceback" not in err


@pytest.mark.parametrize(
    "argv,code",
    [
        (["history", "testhost", "--since", "9999999999w"], 0),
        (["history", "testhost", "--since", "99999999d"], 0),
        (["fleet", "testhost", "gpu02", "--max-age", "99999999999d"], 2),
        (["show", "testhost@~99999999999999999999"], 1),
    ],
    ids=["since-weeks", "since-days", "max-age", "tilde-n"],
)
def test_huge_ages_and_counts_are_one_line(
    drifted: Path, capsys: pytest.CaptureFixture[str], argv: list[str], code: int
) -> None:
    SnapshotStore("snapshots").save(snapshot("gpu02"))  # a host stored in 2026-02: stale unless nothing is
    capsys.readouterr()
    got, out, err = run(capsys, *argv)
    assert got == code and "Traceback" not in err and "Error" not in err, err
    if code == 1:
        assert err == "driftwatch: error: testhost@~99999999999999999999: only 2 readable snapshot(s) of 'testhost'\n"
    if argv[0] == "fleet":
        assert "stale" not in out + err  # no snapshot is 99999999999 days old
