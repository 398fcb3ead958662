"""`driftwatch check` for cron, over the real sshd, with a local HTTP server catching alerts."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from driftwatch.cli import main
from driftwatch.store import SnapshotStore
from tests.hooks import Hook, SilentHook
from tests.hermetic import watch_lines
from tests.sshd import Sshd, free_port
from tests.venvs import make_gpu_venv, site_packages, write_dist_info


@pytest.fixture
def gpu_host(sshd: Sshd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    sshd.fake_env()
    venv = tmp_path / "venv"
    python = make_gpu_venv(venv)
    (tmp_path / "driftwatch.toml").write_text(
        f'timeout = 30\nconnect_timeout = 3\nssh_config = "{sshd.ssh_config_path}"\nknown_hosts = "{sshd.known_hosts_path}"\n'
        # No server patterns: stand-in servers other tests start on this machine are not ours.
        # The hermetic defaults in the file too: a driftwatch run in a subprocess reads them.
        "[watch]\n" + watch_lines(f'python = ["{python}"]\nprocesses = []\n')
    )
    monkeypatch.chdir(tmp_path)
    assert main(["snapshot", "testhost", "--label", "good"]) == 0
    return venv


def set_sgl_kernel(venv: Path, version: str) -> None:
    site = site_packages(venv)
    original = venv / "original-sgl-kernel"
    current = next(site.glob("sgl_kernel-*.dist-info"))
    if not original.exists():  # keep the baseline's install to restore it byte for byte
        shutil.copytree(current, original / current.name)
        shutil.copytree(site / "sgl_kernel", original / "sgl_kernel")
    shutil.rmtree(current)
    shutil.rmtree(site / "sgl_kernel")
    if version in ("baseline", "baseline-reinstalled"):
        for item in original.iterdir():
            shutil.copytree(item, site / item.name)  # copies the mtimes too
            if version == "baseline-reinstalled":  # the same files, installed now
                os.utime(site / item.name)
        return
    write_dist_info(site, "sgl_kernel", "sgl-kernel", version, [], {"sgl_kernel/__init__.py": f"# {version}\n"})


def check(*extra: str) -> int:
    return main(["check", "testhost", *extra])


def test_alerts_once_per_new_drift_and_once_resolved(
    gpu_host: Path, hook: Hook, capsys: pytest.CaptureFixture[str]
) -> None:
    notify = ["--notify", hook.url]
    assert check(*notify) == 0 and hook.posts == []

    set_sgl_kernel(gpu_host, "0.3.17")
    assert check(*notify) == 2
    [alert] = hook.posts
    assert alert["status"] == "drift" and "sgl-kernel" in alert["text"]
    assert alert["changes"][0]["item"] == "sgl-kernel"

    assert check(*notify) == 2 and len(hook.posts) == 1, "the same drift was alerted twice"

    set_sgl_kernel(gpu_host, "0.3.18")
    assert check(*notify) == 2 and len(hook.posts) == 2
    assert "0.3.18" in hook.posts[1]["text"]

    set_sgl_kernel(gpu_host, "baseline")
    assert check(*notify) == 0 and len(hook.posts) == 3
    assert hook.posts[2]["status"] == "resolved" and hook.posts[2]["changes"] == []
    assert check(*notify) == 0 and len(hook.posts) == 3
    assert "SECRET-TOKEN" not in capsys.readouterr().err


def gauges(prom: Path, metric: str) -> dict[str, float]:
    """testhost's ``metric`` by severity, as node_exporter would read the textfile."""
    text = (prom / "driftwatch_testhost.prom").read_text()
    return {
        s.labels["severity"]: s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == metric
    }


def drift_gauges(prom: Path) -> dict[str, float]:
    return gauges(prom, "driftwatch_drift_changes")


def test_downgrade_back_to_the_baseline_resolves_the_alert(
    gpu_host: Path, hook: Hook, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    notify, prom = ["--notify", hook.url], tmp_path / "textfile"
    set_sgl_kernel(gpu_host, "0.3.17")
    assert check(*notify, "--textfile", str(prom)) == 2 and hook.posts[-1]["status"] == "drift"
    # Reinstalled at the baseline's version with identical files: only the install time
    # moved. That is context (a clue), not drift: exit 0, one "resolved", no drift counted.
    set_sgl_kernel(gpu_host, "baseline-reinstalled")
    capsys.readouterr()
    assert check(*notify, "--textfile", str(prom)) == 0
    assert [p["status"] for p in hook.posts] == ["drift", "resolved"]
    assert set(drift_gauges(prom).values()) == {0}
    out = capsys.readouterr().out
    assert "no drift" in out and "reinstalled with identical files" in out


def test_host_markup_in_the_alert_text_is_plain_text(gpu_host: Path, hook: Hook) -> None:
    set_sgl_kernel(gpu_host, "0.3.17")
    [metadata] = site_packages(gpu_host).glob("sgl_kernel-*.dist-info/METADATA")
    hostile = "0.3.17 <!channel> <https://evil.example|Re-authenticate> &\x1b]0;pwned\x07"
    metadata.write_text(metadata.read_text().replace("Version: 0.3.17", f"Version: {hostile}"))
    assert check("--notify", hook.url) == 2
    [alert] = hook.posts
    assert "&lt;!channel&gt; &lt;https://evil.example|Re-authenticate&gt; &amp;\\x1b]0;pwned\\x07" in alert["text"]
    assert "<" not in alert["text"] and "\x1b" not in alert["text"]
    [kernel] = [c for c in alert["changes"] if c["item"] == "sgl-kernel"]
    assert kernel["new"] == hostile  # the structured fields are the data, as it was
    assert not re.search(rb"[\x00-\x1f\x7f-\xff]", hook.bodies[0]), "raw control bytes in the payload"


@pytest.mark.parametrize("url", ["https://hooks.slack.com/services/T0 SEKRIT", "https://[::1/hooks/SEKRIT",
                                 "https://hooks.slack.com:SEKRIT/x", "hooks.slack.com/services/SEKRIT"])
def test_a_bad_notify_url_is_one_line_without_the_url(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert check("--notify", url) == 1
    err = capsys.readouterr().err
    assert err.startswith("driftwatch: error: --notify: ") and len(err.splitlines()) == 1
    assert "SEKRIT" not in err


def test_quiet_prints_once_per_real_change(gpu_host: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert check("--quiet") == 0
    assert capsys.readouterr().out == ""
    set_sgl_kernel(gpu_host, "0.3.17")
    assert check("--quiet") == 2
    assert "sgl-kernel" in capsys.readouterr().out
    # The same drift five minutes later: still exit 2, but nothing for cron to mail.
    assert check("--quiet") == 2
    assert capsys.readouterr().out == ""
    set_sgl_kernel(gpu_host, "0.3.18")  # a different drift is news again
    assert check("--quiet") == 2 and "0.3.18" in capsys.readouterr().out
    set_sgl_kernel(gpu_host, "baseline")  # and so is its resolution
    assert check("--quiet") == 0 and "no drift" in capsys.readouterr().out
    assert check("--quiet") == 0 and capsys.readouterr().out == ""


def test_a_terminal_check_does_not_use_up_the_cron_alert(
    gpu_host: Path, hook: Hook, capsys: pytest.CaptureFixture[str]
) -> None:
    set_sgl_kernel(gpu_host, "0.3.17")
    assert check() == 2 and "sgl-kernel" in capsys.readouterr().out  # a person looking
    assert check("--notify", hook.url) == 2 and len(hook.posts) == 1  # cron still alerts


def test_one_bad_target_never_hides_the_others(
    gpu_host: Path, tmp_path: Path, hook: Hook, capsys: pytest.CaptureFixture[str]
) -> None:
    prom = tmp_path / "textfile"
    set_sgl_kernel(gpu_host, "0.3.17")
    bad = ["testhost:99999", "nosuchalias-" + "x" * 8]  # an invalid port; a name that does not resolve
    code = main(["check", "testhost", *bad, "--notify", hook.url, "--textfile", str(prom)])
    captured = capsys.readouterr()
    assert code == 1  # the worst outcome
    assert "sgl-kernel" in captured.out and len(hook.posts) == 1  # the good host's report and alert
    assert "99999" in captured.err and "nosuchalias" in captured.err
    up = {
        s.labels["host"]: s.value
        for path in prom.glob("*.prom")
        for family in text_string_to_metric_families(path.read_text())
        for s in family.samples
        if s.name == "driftwatch_up"
    }
    assert up == {"testhost": 1, bad[0]: 0, bad[1]: 0}


def test_failed_webhook_is_a_warning_without_the_secret(
    gpu_host: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("driftwatch.cron.notify.BACKOFF_S", 0.01)
    broken = Hook(status=500)
    try:
        set_sgl_kernel(gpu_host, "0.3.17")
        capsys.readouterr()
        assert check("--notify", broken.url) == 2
        assert len(broken.posts) == 3, "a failing hook is retried a bounded number of times"
        err = capsys.readouterr().err
        assert "notification to http://127.0.0.1/… failed: HTTP 500" in err
        assert "SECRET-TOKEN" not in err
    finally:
        broken.close()


def test_cmd_notification_gets_the_json_on_stdin(gpu_host: Path, tmp_path: Path) -> None:
    out = tmp_path / "alert.json"
    program = tmp_path / "alert.sh"
    program.write_text(f"#!/bin/sh\ncat > {out}\n")
    program.chmod(0o755)
    set_sgl_kernel(gpu_host, "0.3.17")
    assert check("--notify", f"cmd:{program}") == 2
    assert json.loads(out.read_text())["changes"][0]["item"] == "sgl-kernel"


def test_textfile_parses_and_unreachable_host_reports_down(gpu_host: Path, tmp_path: Path) -> None:
    prom = tmp_path / "textfile"
    set_sgl_kernel(gpu_host, "0.3.17")
    assert check("--textfile", str(prom)) == 2
    metrics = {m.name: m for m in text_string_to_metric_families((prom / "driftwatch_testhost.prom").read_text())}
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value for m in metrics.values() for s in m.samples}
    assert samples[("driftwatch_up", (("host", "testhost"),))] == 1
    assert samples[("driftwatch_drift_changes", (("host", "testhost"), ("severity", "high")))] >= 1
    assert samples[("driftwatch_probe_ok", (("host", "testhost"), ("probe", "python")))] == 1
    assert ("driftwatch_snapshot_duration_seconds", (("host", "testhost"),)) in samples
    assert ("driftwatch_last_check_timestamp_seconds", (("host", "testhost"),)) in samples

    down = f"root@127.0.0.1:{free_port()}"
    assert main(["check", down, "--textfile", str(prom)]) == 1
    [down_file] = [p for p in prom.iterdir() if p.name != "driftwatch_testhost.prom"]
    families = list(text_string_to_metric_families(down_file.read_text()))
    assert [s.value for f in families if f.name == "driftwatch_up" for s in f.samples] == [0]
    assert not [p for p in prom.iterdir() if not p.name.endswith(".prom")], "a temp file was left behind"


def test_no_baseline_says_how_to_make_one(sshd: Sshd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    sshd.fake_env()
    (tmp_path / "driftwatch.toml").write_text(
        f'timeout = 30\nssh_config = "{sshd.ssh_config_path}"\nknown_hosts = "{sshd.known_hosts_path}"\n'
    )
    monkeypatch.chdir(tmp_path)
    assert check() == 1
    assert "driftwatch label testhost@latest good" in capsys.readouterr().err
    assert main(["label", "testhost@latest", "good"]) == 0
    assert check() == 0


def test_unreadable_baseline_names_the_file(gpu_host: Path, capsys: pytest.CaptureFixture[str]) -> None:
    [baseline] = SnapshotStore("snapshots").paths("testhost")
    baseline.write_text('{"schema_version": 1, "truncated')
    assert check() == 1
    assert str(baseline.name) in capsys.readouterr().err


def test_unchanged_host_keeps_one_unlabelled_snapshot(gpu_host: Path) -> None:
    for _ in range(6):
        assert check() == 0
    snaps = SnapshotStore("snapshots").paths("testhost")
    assert len(snaps) == 2, [p.name for p in snaps]  # the baseline and the newest check
    set_sgl_kernel(gpu_host, "0.3.17")
    assert check() == 2 and check() == 2
    assert len(SnapshotStore("snapshots").paths("testhost")) == 3, "a real change must be kept"


def test_a_snapshot_a_user_just_named_outlives_check_and_prune(
    gpu_host: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The user diffs the last unchanged snapshot by its time; the next cron checks find the
    # host unchanged again, and prune runs: the diff the user ran still runs.
    assert check() == 0
    store = SnapshotStore("snapshots")
    [_, named] = store.paths("testhost")
    ref = f"testhost@{named.name[:15]}"  # 20261202T035800: the timestamp prefix list shows
    assert main(["diff", "testhost@good", ref]) == 0
    for _ in range(3):
        assert check() == 0
    assert main(["prune", "--keep", "1"]) == 0
    assert named in store.paths("testhost")
    capsys.readouterr()
    assert main(["diff", "testhost@good", ref]) == 0, capsys.readouterr().err
    assert len(store.paths("testhost")) == 3  # the baseline, the named one and the newest


def test_concurrent_checks_finish_with_one_alert(gpu_host: Path, hook: Hook) -> None:
    set_sgl_kernel(gpu_host, "0.3.17")
    argv = [sys.executable, "-m", "driftwatch", "check", "testhost", "--notify", hook.url]
    runs = [subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for _ in range(2)]
    codes = [run.wait(timeout=120) for run in runs]
    assert codes == [2, 2]
    assert len(hook.posts) == 1
    store = SnapshotStore("snapshots")
    assert all(store.paths("testhost")) and main(["list", "testhost"]) == 0


def test_label_remove_and_prune_keep_labelled(gpu_host: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = SnapshotStore("snapshots")
    for version in ("0.3.17", "0.3.18", "0.3.19"):
        set_sgl_kernel(gpu_host, version)
        assert main(["snapshot", "testhost"]) == 0
    assert len(store.paths("testhost")) == 4
    assert main(["prune", "--keep", "1"]) == 0
    remaining = store.paths("testhost")
    assert len(remaining) == 2  # the labelled baseline and the newest
    assert main(["label", "testhost@good", "good", "--remove"]) == 0
    assert main(["label", "testhost@latest", "nope", "--remove"]) == 1
    assert main(["prune", "--keep", "1"]) == 0 and len(store.paths("testhost")) == 1
    assert main(["prune"]) == 1


def test_a_webhook_that_never_answers_costs_the_alert_not_the_result(
    gpu_host: Path, tmp_path: Path, hook: Hook, capsys: pytest.CaptureFixture[str]
) -> None:
    # --deadline as a scheduler's health check runs it: the drift is found in seconds, then
    # the webhook hangs. The result (exit code, NHC line, .prom) stands; the alert waits.
    silent = SilentHook()
    prom = tmp_path / "textfile"
    set_sgl_kernel(gpu_host, "0.3.17")
    capsys.readouterr()
    try:
        started = time.monotonic()
        code = check("--deadline", "12", "--nhc", "--textfile", str(prom), "--notify", silent.url)
        took = time.monotonic() - started
    finally:
        silent.close()
    out, err = capsys.readouterr()
    assert code == 2 and out.startswith("ERROR: driftwatch: sgl-kernel 0.3.16.post4 → 0.3.17"), (out, err)
    # The deadline starts once the config is read; a loaded machine adds a little before it.
    assert took < 12 + 3, f"{took:.1f}s with --deadline 12: the webhook's three tries were waited for"
    assert "notification to http://127.0.0.1/… failed" in err and "SECRET-TOKEN" not in err
    assert "within the --deadline" not in err
    samples = {s.name: s.value for m in text_string_to_metric_families((prom / "driftwatch_testhost.prom").read_text())
               for s in m.samples if s.name == "driftwatch_up"}
    assert samples == {"driftwatch_up": 1}
    assert check("--notify", hook.url) == 2 and len(hook.posts) == 1  # not delivered: it goes out next time
