"""`driftwatch snapshot` over SSH, end to end, against the real sshd fixture."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import pytest

from driftwatch.cli import main
from tests.sshd import FAKE_NVIDIA_SMI, Sshd, free_port
from tests.transport import wait_gone
from tests.venvs import make_gpu_venv


@pytest.fixture
def remote(sshd: Sshd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A config reaching the sshd fixture as `testhost`, watching a venv and odd files."""
    sshd.fake_env()
    python = make_gpu_venv(tmp_path / "venv")
    src = tmp_path / "src dir"
    src.mkdir()
    (src / "odd name $(touch x).py").write_text("mem_fraction_static = 0.88\n")
    write_config(tmp_path, sshd, f'python = ["{python}"]\nfiles = ["{src}/*.py"]\n')
    monkeypatch.chdir(tmp_path)
    return tmp_path


def write_config(root: Path, sshd: Sshd, watch: str = "", known_hosts: str | None = None, extra: str = "") -> None:
    (root / "driftwatch.toml").write_text(
        f'timeout = 30\nconnect_timeout = 3\nssh_config = "{sshd.ssh_config_path}"\n'
        f'known_hosts = "{known_hosts or sshd.known_hosts_path}"\n{extra}[watch]\n{watch}'
    )


def snapshot_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[dict], str]:
    code = main(["snapshot", *argv, "--json"])
    captured = capsys.readouterr()
    return code, json.loads(captured.out), captured.err


def test_healthy_host_every_probe_ok(remote: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, [entry], _ = snapshot_json(capsys, "testhost", "--label", "good")
    assert code == 0
    snap = entry["snapshot"]
    assert snap["host"]["name"] == "testhost" and snap["host"]["address"].endswith("@127.0.0.1:" + snap["host"]["address"].rsplit(":", 1)[1])
    probes = snap["probes"]
    assert probes["gpu"]["facts"]["gpus"]["GPU-00000000-0000-0000-0000-000000000000"]["name"] == "NVIDIA H200"
    dists = next(iter(probes["python"]["facts"]["interpreters"].values()))["distributions"]
    assert dists["sgl-kernel"]["version"] == "0.3.16.post4"
    assert probes["cuda"]["facts"]["nccl"]["distributions"]["nvidia-nccl-cu12"] == "2.27.3"
    boot_id = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert probes["system"]["facts"]["boot_id"] == boot_id
    assert Path(entry["path"]).parent.name == "testhost"


def test_odd_path_is_hashed_and_runs_nothing(remote: Path, sshd: Sshd, capsys: pytest.CaptureFixture[str]) -> None:
    code, [entry], _ = snapshot_json(capsys, "testhost")
    files = entry["snapshot"]["probes"]["files"]["facts"]["files"]
    [(path, facts)] = files.items()
    assert path.endswith("odd name $(touch x).py")
    assert facts["sha256"] == hashlib.sha256(b"mem_fraction_static = 0.88\n").hexdigest()
    assert code == 0 and not list(remote.rglob("x")) and not (sshd.workdir / "home" / "x").exists()


def test_hung_nvidia_smi_times_out_others_complete_nothing_left_running(
    remote: Path, sshd: Sshd, capsys: pytest.CaptureFixture[str]
) -> None:
    sshd.fake_env(FAKE_NVIDIA_SMI_HANG="1")
    started = time.monotonic()
    code, [entry], _ = snapshot_json(capsys, "testhost", "--timeout", "2")
    elapsed = time.monotonic() - started
    probes = entry["snapshot"]["probes"]
    assert code == 3 and probes["gpu"]["status"] == "timeout"
    assert {p["status"] for name, p in probes.items() if name != "gpu"} <= {"ok", "skipped"}
    assert probes["python"]["status"] == probes["system"]["status"] == "ok"
    assert Path(entry["path"]).is_file()
    assert elapsed < 2 + 5, "the snapshot waited far beyond the probe deadline"
    # This checkout's fake only: another checkout's test run on the machine is not ours.
    assert wait_gone(str(FAKE_NVIDIA_SMI), within=5) == [], "a hung nvidia-smi was left running on the host"


def test_unknown_host_key_is_refused_with_how_to_trust(
    remote: Path, sshd: Sshd, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    write_config(remote, sshd, known_hosts=str(empty))
    assert main(["snapshot", "testhost"]) == 1
    err = capsys.readouterr().err
    assert "127.0.0.1" in err and "--accept-new-host-key" in err and "Traceback" not in err
    assert not (remote / "snapshots").exists()
    assert main(["snapshot", "testhost", "--accept-new-host-key"]) in (0, 3)
    assert sshd.host_public_key.split()[1] in empty.read_text()


def test_unreachable_port_fails_fast_with_one_line(remote: Path, capsys: pytest.CaptureFixture[str]) -> None:
    port = free_port()
    started = time.monotonic()
    assert main(["snapshot", f"root@127.0.0.1:{port}"]) == 1
    assert time.monotonic() - started < 3 + 3
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(port) in err and "Traceback" not in err
    assert not (remote / "snapshots").exists()


def test_one_unreachable_host_does_not_cost_the_others(remote: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, entries, err = snapshot_json(capsys, "testhost", f"root@127.0.0.1:{free_port()}")
    assert code == 1
    assert [("path" in e, "error" in e) for e in entries] == [(True, False), (False, True)]
    assert "127.0.0.1" in err


def test_a_host_dropping_mid_snapshot_is_connection_lost_not_missing_facts(
    remote: Path, sshd: Sshd, capsys: pytest.CaptureFixture[str]
) -> None:
    sshd.fake_env(FAKE_NVIDIA_SMI_DROP="1")  # the first nvidia-smi call kills the session's sshd
    code, [entry], err = snapshot_json(capsys, "testhost")
    assert code in (1, 3)  # whatever finished before the drop may be stored
    reasons = [entry.get("error") or ""]
    if "snapshot" in entry:
        gpu = entry["snapshot"]["probes"]["gpu"]
        assert gpu["status"] == "error" and gpu["facts"] == {}
        reasons.append(gpu["error"])
    text = " ".join(reasons)
    assert "lost" in text and "connection" in text, text
    assert "query-gpu" not in text  # not "nvidia-smi produced no query-gpu output"


def test_a_bad_target_is_its_own_error_line(remote: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, entries, err = snapshot_json(capsys, "testhost", "testhost:99999")
    assert code == 1
    good, bad = entries
    assert good["exit_code"] == 0 and Path(good["path"]).exists()
    assert bad["exit_code"] == 1 and "99999" in bad["error"] and "99999" in err
