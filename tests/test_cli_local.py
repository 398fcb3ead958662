"""The CLI end to end on the `local` target, with a fake nvidia-smi replaying a real H200."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from driftwatch.cli import main
from tests.localhost import local_host


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory with a config watching a real venv, repo and files."""
    return local_host(tmp_path, monkeypatch)


def test_snapshot_local_records_every_probe(host: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["snapshot", "local", "--label", "good", "--json"]) == 0
    [entry] = json.loads(capsys.readouterr().out)
    snap = entry["snapshot"]
    assert snap["labels"] == ["good"] and Path(entry["path"]).is_file()
    probes = snap["probes"]
    assert probes["gpu"]["facts"]["driver_version"] == "590.48.01"
    assert "sgl-kernel" in next(iter(probes["python"]["facts"]["interpreters"].values()))["distributions"]
    assert len(probes["files"]["facts"]["files"]) == 1
    assert probes["git"]["status"] == "skipped"
    assert {p["status"] for p in probes.values()} <= {"ok", "skipped"}


def test_hung_nvidia_smi_is_a_timeout_others_kept_exit_3(
    host: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FAKE_NVIDIA_SMI_HANG", "1")
    assert main(["snapshot", "local", "--timeout", "1", "--json"]) == 3
    [entry] = json.loads(capsys.readouterr().out)
    probes = entry["snapshot"]["probes"]
    assert probes["gpu"]["status"] == "timeout"
    assert probes["python"]["status"] == "ok" and probes["system"]["status"] == "ok"
    assert Path(entry["path"]).is_file()


def test_list_show_and_refs(host: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["snapshot", "local", "--label", "good"]) == 0
    assert main(["snapshot", "local"]) == 0
    capsys.readouterr()
    assert main(["list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["labels"] for r in rows] == [["good"], []]
    assert main(["show", "local@good"]) == 0
    out = capsys.readouterr().out
    assert "NVIDIA driver  590.48.01 (supports CUDA" in out and "GPU 0 (H200, " in out
    assert "sgl-kernel" in out and "0.3.16.post4" in out  # the focus packages, with versions
    assert main(["show", "local@~1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["labels"] == ["good"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["show", "local@nope"], "no snapshots of 'local'"),
        (["show", "gpu99@latest"], "no snapshots of 'gpu99'"),
        (["snapshot", "local", "--config", "missing.toml"], "config file not found"),
        (["list", "gpu99"], "does not exist"),  # no store here yet: which one was read, and that it is missing
        (["snapshot", "local", "--timeout", "soon"], "Invalid value"),
        (["snapshot", "local", "--timeout", "inf"], "inf is not a number of seconds from 1 to 86400"),
        # less than a second per probe starts no command: refused, not an empty snapshot labelled good
        (["snapshot", "local", "--timeout", "0.1", "--label", "good"], "0.1 is not a number of seconds from 1"),
        (["snapshot", "local", "--timeout", "nan"], "nan is not a number of seconds"),
        (["check", "local", "--timeout", "1e9"], "1e+09 is not a number of seconds"),
        (["fleet", "local", "gpu01", "--snapshot", "--timeout", "-1"], "-1 is not a number of seconds"),
        (["prune", "--keep-days", "nan"], "nan is not a number of days"),
        (["frobnicate"], "No such command"),
    ],
)
def test_user_mistakes_are_one_line_exit_1(host: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_installed_command_version_and_help() -> None:
    exe = [sys.executable, "-m", "driftwatch"]
    version = subprocess.run([*exe, "--version"], capture_output=True, text=True, check=True)
    assert version.stdout.startswith("driftwatch ")
    for command in ("snapshot", "list", "show"):
        result = subprocess.run([*exe, command, "--help"], capture_output=True, text=True)
        assert result.returncode == 0 and "Usage:" in result.stdout


def test_installed_command_exit_codes_and_whole_output(host: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The entry point leaves without Python's teardown: what it printed must all arrive,
    # and its exit code must be the command's. Buffered output, as in cron or a pipe.
    monkeypatch.delenv("PYTHONUNBUFFERED", raising=False)
    exe = [sys.executable, "-m", "driftwatch"]
    done = subprocess.run([*exe, "snapshot", "local", "--json"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    [entry] = json.loads(done.stdout)
    assert entry["exit_code"] == 0 and Path(entry["path"]).is_file()
    shown = subprocess.run([*exe, "show", "local@latest", "--json"], capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0 and json.loads(shown.stdout)["probes"]["gpu"]["status"] == "ok"
    listed = subprocess.run([*exe, "list", "--json"], capture_output=True, text=True, timeout=60)  # < one buffer
    assert listed.returncode == 0 and [row["host"] for row in json.loads(listed.stdout)] == ["local"]
    missing = subprocess.run([*exe, "show", "nosuchhost@latest"], capture_output=True, text=True, timeout=60)
    assert missing.returncode == 1 and "driftwatch: error:" in missing.stderr



def test_json_output_does_not_load_the_terminal_report(host: Path) -> None:
    # rich costs ~20 ms to import: cron jobs and scripts asking for JSON do not pay it.
    code = (
        "import sys; from driftwatch.cli import main; rc = main(['snapshot', 'local', '--json']); "
        "print(rc, sorted({m.split('.')[0] for m in sys.modules} & {'rich', 'paramiko'}), file=sys.stderr)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stderr.strip().splitlines()[-1] == "0 []"


def test_help_reads_like_a_man_page(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    top = capsys.readouterr().out
    commands = top.split("Commands:", 1)[1]
    assert "..." not in commands and "e.g.\n" not in commands  # whole sentences, never cut
    for command in ("snapshot", "list", "show", "diff", "check", "fleet", "history", "accept", "label", "prune"):
        assert main([command, "--help"]) == 0
        text = capsys.readouterr().out
        assert "<list[str]>" not in text and "{" not in text.splitlines()[0], text
        assert "[[" not in text and "]...]" not in text, text
    assert main(["prune", "--help"]) == 0
    assert capsys.readouterr().out.startswith("Usage: driftwatch prune [OPTIONS] [HOST...]")
    for command in ("show", "doctor"):  # every REF form, in every command that takes one
        assert main([command, "--help"]) == 0
        assert "HOST@<timestamp" in capsys.readouterr().out, command


def test_a_command_built_alone_reads_and_fails_as_in_the_whole_group(capsys: pytest.CaptureFixture[str]) -> None:
    """main() builds only the command named (typer's build of all twelve is ~45 ms a run):
    its help, its usage errors and the group's own words are what the whole group gives."""
    import typer.main

    from driftwatch.cli import app

    whole = typer.main.get_command(app)
    names = sorted(whole.commands)  # type: ignore[attr-defined]
    assert len(names) == 12
    for args in ([[name, "--help"] for name in names] + [["snapshot"], ["diff", "a"], ["list", "--bogus"]]):
        code = main(args)
        alone = capsys.readouterr()
        try:
            expected = whole.main(args=args, prog_name="driftwatch", standalone_mode=False)
        except typer.Exit as exc:
            expected = exc.exit_code
        except Exception as exc:  # noqa: BLE001  # a usage error: main() prints it, exit 1
            show = getattr(exc, "show", None)
            assert callable(show)
            show()
            expected = 1
        grouped = capsys.readouterr()
        assert (code, alone.out, alone.err) == (expected or 0, grouped.out, grouped.err), args


def test_every_command_that_takes_timeout_says_its_default(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("snapshot", "check", "fleet", "doctor"):
        assert main([command, "--help"]) == 0
        text = " ".join(capsys.readouterr().out.split())  # as wrapped for any terminal width
        assert "--timeout SECONDS Per-probe deadline in seconds" in text, command
        assert "(default: the config's timeout, 10 unless set there)" in text, command
