"""A store a host, a node or a clock made hostile: files that never end, devices and FIFOs
named like snapshots, objects too big to read, snapshots dated in the future, 20,000
snapshots of one host. Against the real sshd host (`testhost`, a real venv) where a
command snapshots, and a real S3 endpoint (moto) for objects.

Commands that could hang or exhaust memory before their fix run in a subprocess with a
bound on its address space and time: a failure is then a MemoryError or a timeout, not
a machine out of memory."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from driftwatch.cli import main
from driftwatch.model import utcnow
from driftwatch.store import SnapshotStore
from driftwatch.store.names import snapshot_stem
from tests.builders import snapshot
from tests.s3 import S3Server
from tests.test_cli_check import gpu_host, set_sgl_kernel  # noqa: F401  (gpu_host: a fixture)
from tests.test_cli_store import run

ADDRESS_SPACE = 2 << 30  # the bound on a bounded command: a 3 GB read cannot fit


def bounded(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`driftwatch ARGV` in a subprocess with at most ADDRESS_SPACE of memory and ``timeout``."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))

    return subprocess.run(
        [sys.executable, "-m", "driftwatch", *argv], capture_output=True, text=True, timeout=timeout,
        preexec_fn=limit, stdin=subprocess.DEVNULL,
    )


def plant(folder: Path, minutes: int) -> Path:
    """A path in ``folder`` named like a snapshot taken ``minutes`` from now."""
    return folder / f"{snapshot_stem(utcnow() + timedelta(minutes=minutes))}.json"


@pytest.mark.parametrize("what", ["/dev/zero", "fifo"])
def test_show_of_a_device_or_fifo_is_one_line(tmp_path: Path, what: str) -> None:
    path = what
    if what == "fifo":
        path = str(tmp_path / "snap.json")
        os.mkfifo(path)
    done = bounded("show", path, "--store", str(tmp_path / "snapshots"), timeout=30)
    kind = "a character device" if what == "/dev/zero" else "a FIFO"
    assert (done.returncode, done.stderr) == (1, f"driftwatch: error: {path}: not a snapshot file: it is {kind}\n")


def test_files_that_never_end_in_a_host_folder_are_skipped_and_named(gpu_host: Path) -> None:  # noqa: F811
    folder = gpu_host.parent / "snapshots" / "testhost"
    huge, fifo, device = plant(folder, 1), plant(folder, 2), plant(folder, 3)
    with open(huge, "wb") as handle:  # sparse: 3 GB named like the newest snapshot, no disk used
        handle.truncate(3 << 30)
    os.mkfifo(fifo)
    device.symlink_to("/dev/zero")
    listed = bounded("list", "testhost", "--json")
    assert listed.returncode == 0, listed.stderr
    errors = {row["path"]: row.get("error") for row in json.loads(listed.stdout)}
    assert "3072.0 MiB, over the 128 MiB read cap (max_snapshot_bytes): not read" in errors[str(huge.relative_to(gpu_host.parent))]
    assert errors[str(fifo.relative_to(gpu_host.parent))].endswith("not a snapshot file: it is a FIFO")
    assert errors[str(device.relative_to(gpu_host.parent))].endswith("not a snapshot file: it is a character device")
    checked = bounded("check", "testhost")
    assert checked.returncode == 0, checked.stderr  # the baseline and today's host agree
    for path in (huge, fifo, device):
        assert f"skipped unreadable snapshot snapshots/testhost/{path.name}" in checked.stderr
    assert "Traceback" not in listed.stderr + checked.stderr


def test_the_read_cap_is_a_config_value(gpu_host: Path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: F811
    config = gpu_host.parent / "driftwatch.toml"
    text = config.read_text()
    config.write_text("max_snapshot_bytes = 1000\n" + text)
    code, out, err = run(capsys, "show", "testhost@latest")
    assert code == 1 and "over the 1000 bytes read cap (max_snapshot_bytes): not read" in err
    config.write_text("max_snapshot_bytes = 0\n" + text)
    code, out, err = run(capsys, "list")
    assert code == 1 and "max_snapshot_bytes: Input should be greater than 0" in err


def test_an_oversized_object_is_skipped_and_named_without_being_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, s3: S3Server, capsys: pytest.CaptureFixture[str]
) -> None:
    # Any node with write access to the bucket can put an object under another's prefix.
    s3.use(monkeypatch)
    url = f"s3://{s3.bucket()}/fleet"
    (tmp_path / "driftwatch.toml").write_text(f'store = "{url}"\nmax_snapshot_bytes = 1048576\n')
    monkeypatch.chdir(tmp_path)
    store = SnapshotStore(url)
    now = utcnow()
    for host in ("gpu01", "gpu02"):
        store.save(snapshot(host).model_copy(update={"taken_at": now}))
    big = snapshot("gpu02", cuda={"nccl": {"distributions": {"nvidia-nccl-cu12": "2.21.5"}}})
    padded = big.model_copy(update={"taken_at": now + timedelta(seconds=1)}).model_dump_json(indent=1)
    stem = snapshot_stem(now + timedelta(seconds=1))
    store.backend.replace(store.location("gpu02", f"{stem}-big.json"), (padded[:-1] + " " * (2 << 20) + "}").encode())
    code, out, err = run(capsys, "fleet", "--all", "--json")
    assert code == 0, err  # gpu02 is compared by its snapshot before the big one: both agree
    assert json.loads(out)["summary"]["hosts"] == ["gpu01", "gpu02"]
    assert f"skipped unreadable snapshot {url}/gpu02/{stem}-big.json: 2.0 MiB, over the 1 MiB read cap" in err


def test_a_snapshot_dated_in_the_future_is_not_the_latest(
    gpu_host: Path, capsys: pytest.CaptureFixture[str]  # noqa: F811
) -> None:
    # A pushing node whose clock ran ahead wrote the baseline's state dated next year.
    folder = gpu_host.parent / "snapshots" / "testhost"
    [good] = folder.glob("*.json")
    future = folder / f"{snapshot_stem(utcnow() + timedelta(days=365))}.json"
    future.write_text(good.read_text().replace('"good"', '"pushed"'))
    set_sgl_kernel(gpu_host, "0.3.17")
    assert main(["snapshot", "testhost"]) == 0
    capsys.readouterr()
    code, out, err = run(capsys, "diff", "testhost@good", "testhost@latest")
    assert code == 2 and "sgl-kernel 0.3.16.post4 → 0.3.17" in out, out + err
    assert f"{future.relative_to(gpu_host.parent)} is dated " in err and "ahead of this machine's clock" in err
    code, out, err = run(capsys, "accept", "testhost", "sgl-kernel", "--reason", "rolled out on purpose")
    assert code == 0, err
    code, out, err = run(capsys, "check", "testhost")  # still 2: the known-bad state it leads to is new
    assert "no drift (1 accepted)" in out and "accepted by " in out and "rolled out on purpose" in out
    assert f"{future.relative_to(gpu_host.parent)} is dated " in err


def test_list_reads_each_files_head_not_the_whole_file(gpu_host: Path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: F811
    # Its time, labels and size come from its name, head and stat: a body damaged past the
    # labels does not hide them (the commands that read it whole name it).
    [good] = (gpu_host.parent / "snapshots" / "testhost").glob("*.json")
    text = good.read_text()
    good.write_text(text[: text.index('"probes"') + 200])
    code, out, err = run(capsys, "list", "testhost", "--json")
    [row] = json.loads(out)
    assert code == 0 and row["labels"] == ["good"] and row["bytes"] == good.stat().st_size, err
    assert row["taken_at"].startswith(str(utcnow().year))
