"""`driftwatch check local` as a scheduler's health check: --fail-on, --nhc and --deadline,
on a `local` host with a real venv and a fake nvidia-smi replaying an H200."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from driftwatch.cli import main
from tests.localhost import local_host
from tests.sshd import Sshd
from tests.test_cli_check import set_sgl_kernel
from tests.transport import kill_all, pids_matching, sleep_marker, wait_gone
from tests.venvs import site_packages

NHC = ["check", "local", "--nhc"]


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A `local` host with a good baseline; no server patterns (other tests' stand-ins are not ours)."""
    root = local_host(tmp_path, monkeypatch, watch="processes = []\n")
    assert main(["snapshot", "local", "--label", "good"]) == 0
    return root


def edit_watched_file(root: Path) -> None:
    (root / "src" / "server_args.py").write_text("mem_fraction_static = 0.5\n")  # a medium change


def test_drift_below_fail_on_passes_silently_and_at_it_fails_with_one_line(
    host: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    edit_watched_file(host)
    capsys.readouterr()
    assert main([*NHC, "--fail-on", "high"]) == 0
    assert capsys.readouterr().out == ""
    assert main(["check", "local"]) == 2, "the edit is drift: only --fail-on high lets it pass"

    set_sgl_kernel(host / "venv", "0.3.17")  # high
    capsys.readouterr()
    assert main([*NHC, "--fail-on", "high"]) == 2
    out = capsys.readouterr().out
    assert out.startswith("ERROR: driftwatch: sgl-kernel 0.3.16.post4 → 0.3.17 (patch upgrade") and out.count("\n") == 1
    assert not out.rstrip("\n").endswith("more)"), "only the sgl-kernel change is at or above high"

    assert main([*NHC, "--fail-on", "medium"]) == 2
    out = capsys.readouterr().out
    assert out.startswith("ERROR: driftwatch: sgl-kernel") and out.endswith(" (+1 more)\n"), out


def test_fail_on_critical_passes_a_high_drift_but_still_records_it(
    host: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    set_sgl_kernel(host / "venv", "0.3.17")
    capsys.readouterr()
    assert main([*NHC, "--fail-on", "critical", "--textfile", str(tmp_path / "prom")]) == 0
    assert capsys.readouterr().out == ""
    [prom] = (tmp_path / "prom").glob("driftwatch_*.prom")  # named after the host `local` is stored as
    assert 'severity="high"} 1.0' in "".join(
        line for line in prom.read_text().splitlines() if line.startswith("driftwatch_drift_changes{")
    )


def test_an_accepted_change_takes_the_known_bad_state_it_made_with_it(
    host: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    set_sgl_kernel(host / "venv", "0.3.17")  # sglang 0.5.6 pins sgl-kernel==0.3.16.post4
    assert main(["check", "local"]) == 2  # stored: what accept reads
    capsys.readouterr()
    assert main([*NHC, "--fail-on", "high"]) == 2
    assert "sgl-kernel 0.3.16.post4 → 0.3.17" in capsys.readouterr().out
    assert main(["accept", "local", "--reason", "trying 0.3.17"]) == 0
    capsys.readouterr()
    # The broken pin is part of the accepted upgrade: decided with it, the node is not drained.
    assert main([*NHC, "--fail-on", "high"]) == 0
    assert not capsys.readouterr().out.startswith("ERROR")


def test_the_line_is_one_escaped_bounded_line_whatever_the_host_says(
    host: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    set_sgl_kernel(host / "venv", "0.3.17")
    [metadata] = site_packages(host / "venv").glob("sgl_kernel-*.dist-info/METADATA")
    hostile = "0.3.17\x1b]0;pwned\x07\u202e" + "9" * 400
    metadata.write_text(metadata.read_text().replace("Version: 0.3.17", f"Version: {hostile}"))
    capsys.readouterr()
    assert main([*NHC, "--fail-on", "high"]) == 2
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and len(out.rstrip("\n")) <= 200
    assert out.startswith("ERROR: driftwatch: sgl-kernel 0.3.16.post4 → 0.3.17\\x1b]0;pwned\\x07\\u202e999")
    assert out.rstrip("\n").endswith("…")
    assert not any(ord(c) < 32 or 0x7F <= ord(c) < 0xA0 or c == "\u202e" for c in out.rstrip("\n"))


def test_a_hung_nvidia_smi_drains_the_node_for_itself_not_for_an_unrelated_edit(
    host: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    edit_watched_file(host)  # drift, but nothing nvidia-smi reads
    monkeypatch.setenv("FAKE_NVIDIA_SMI_HANG", "1")
    capsys.readouterr()
    assert main([*NHC, "--timeout", "2"]) == 2
    out = capsys.readouterr().out
    assert out.startswith("ERROR: driftwatch: gpu probe timed out (nvidia-smi hung?)") and out.endswith(" (+1 more)\n"), out


def test_a_check_that_cannot_run_exits_1_with_its_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    local_host(tmp_path, monkeypatch, watch="processes = []\n")  # no baseline yet
    assert main([*NHC, "--fail-on", "high"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("ERROR: driftwatch: could not check: no snapshot labelled 'good' yet; if the host is good now")
    assert out.count("\n") == 1


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([*NHC, "--json"], "--nhc prints one line: it cannot be combined with --json or --markdown"),
        (["check", "local", "--fail-on", "severe"], "'severe' is not a severity: pick one of critical, high, medium"),
        (["check", "local", "--deadline", "0"], "0 is not a number of seconds"),
        ([*NHC, "gpu01"], "--nhc reports on one host, the node it runs on: got 2 targets"),
    ],
)
def test_mistakes_are_one_line(
    host: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert main(argv) == 1
    assert message in capsys.readouterr().err


def test_deadline_bounds_the_whole_check_and_a_hung_probe_is_a_timeout(host: Path, tmp_path: Path) -> None:
    # nvidia-smi hangs (a wedged driver) far past the configured per-probe timeout of 30 s.
    marker = str(host / "bin" / "nvidia-smi")
    env = {**os.environ, "FAKE_NVIDIA_SMI_HANG": "1", "PYTHONUNBUFFERED": "1"}
    started = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "driftwatch", *NHC, "--fail-on", "high", "--deadline", "8"],
            cwd=host, env=env, capture_output=True, text=True, timeout=60,
        )
        took = time.monotonic() - started
        assert took < 8, f"the check took {took:.1f}s with --deadline 8"
        assert done.returncode == 2, done.stderr
        assert done.stdout.startswith("ERROR: driftwatch: gpu probe timed out (nvidia-smi hung?)"), done.stdout
        assert "before the --deadline" in done.stdout
        assert wait_gone(marker, within=3.0) == [], "the hung nvidia-smi outlived the check"
    finally:
        kill_all(pids_matching(marker))


def test_past_the_deadline_what_was_collected_is_stored_and_diffed(
    host: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FAKE_NVIDIA_SMI_HANG", "1")
    assert main(["check", "local", "--deadline", "6", "--json"]) == 2
    [entry] = json.loads(capsys.readouterr().out)
    # Under load the deadline may also cut the login shell short: a read that timed out, said so.
    changes = [c for c in entry["changes"] if "timed out" not in str(c["new"])]
    assert [(c["category"], c["item"], c["new"]) for c in changes] == [("probe", "gpu", "timeout")]
    assert main(["show", "local@latest", "--json"]) == 0
    probes = json.loads(capsys.readouterr().out)["probes"]
    assert probes["gpu"]["status"] == "timeout" and "--deadline" in probes["gpu"]["error"]
    assert probes["python"]["status"] == "ok" and probes["files"]["status"] == "ok"


def test_under_the_deadline_a_hung_login_profile_gets_a_share_and_is_gone(
    host: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The login shell runs in a session of its own, out of reach of the command's `timeout`:
    # only its own budget, a share of what the deadline leaves, stops a profile that hangs.
    marker = sleep_marker()
    home = host / "home"
    home.mkdir()
    (home / ".profile").write_text(f"{marker}\n")
    monkeypatch.setenv("HOME", str(home))
    try:
        assert main(["check", "local", "--deadline", "8", "--json"]) in (0, 2)
        assert wait_gone(marker, within=3.0) == [], "the login shell's profile outlived the check"
    finally:
        kill_all(pids_matching(marker))
    capsys.readouterr()
    assert main(["show", "local@latest", "--json"]) == 0
    processes = json.loads(capsys.readouterr().out)["probes"]["processes"]["facts"]
    # Its own budget ran out, or (on a loaded machine) the command around it did first.
    assert processes["login_env"] is None and "timed out after" in processes["login_env_error"]


def test_deadline_over_ssh_bounds_the_check_and_nothing_is_left_on_the_target(sshd: Sshd, tmp_path: Path) -> None:
    sshd.fake_env(FAKE_NVIDIA_SMI_HANG="1")
    (tmp_path / "driftwatch.toml").write_text(
        f'timeout = 30\nconnect_timeout = 30\nssh_config = "{sshd.ssh_config_path}"\n'
        f'known_hosts = "{sshd.known_hosts_path}"\n[watch]\nprocesses = []\n'
    )
    fake = str(sshd.workdir / "bin" / "nvidia-smi")
    started = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "driftwatch", "check", "testhost", "--baseline", "none", "--deadline", "8", "--json"],
            cwd=tmp_path, capture_output=True, text=True, timeout=60,
        )
        took = time.monotonic() - started
        assert took < 8, f"the check took {took:.1f}s with --deadline 8"
        [entry] = json.loads(done.stdout)
        assert done.returncode == 1 and "no snapshot labelled 'none'" in entry["error"]  # checked, no baseline
        assert wait_gone(fake, within=3.0) == [], "the hung nvidia-smi outlived the check on the target"
    finally:
        kill_all(pids_matching(fake))
    [stored] = (tmp_path / "snapshots" / "testhost").glob("*.json")
    probes = json.loads(stored.read_text())["probes"]
    assert probes["gpu"]["status"] == "timeout" and probes["system"]["status"] == "ok"


def test_a_node_that_cannot_be_checked_is_said_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """stdout carries the line the scheduler reads; stderr (slurmd's log) does not repeat it."""
    config = tmp_path / "driftwatch.toml"
    config.write_text(f'store = "{tmp_path / "snapshots"}"\n[hosts.gpu01]\naddress = "root@127.0.0.1:1"\n')
    capsys.readouterr()
    assert main(["check", "gpu01", "--nhc", "--config", str(config)]) == 1
    out, err = capsys.readouterr()
    assert out.startswith("ERROR: driftwatch: could not check: ") and out.count("\n") == 1, out
    reason = out.removeprefix("ERROR: driftwatch: could not check: ").strip()
    assert reason and reason not in err, err
