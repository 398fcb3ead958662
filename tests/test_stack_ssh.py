"""The loaded stack's incidents, each made on a real host over SSH and named first by `diff`.

Each test gets its own sshd whose sessions have a private HOME, so the caches, NCCL files
and hub cache sit at their real default places (~/.cache/flashinfer, ~/.nccl.conf,
~/.cache/huggingface/hub) without touching this machine's. /etc is not ours to write: the
test stands a configured file in for /etc/nccl.conf.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from driftwatch.cli import main
from driftwatch.facts.fmt import when
from tests.hfcache import GENERATION, model_files, write_revision
from tests.sshd import Sshd, sshd_with_home
from tests.venvs import make_gpu_venv, sglang_checkout, site_packages, write_dist_info


@dataclass
class Host:
    root: Path
    home: Path
    sshd: Sshd
    python: Path

    def configure(self, watch: str) -> None:
        (self.root / "driftwatch.toml").write_text(
            f'timeout = 30\nconnect_timeout = 5\nssh_config = "{self.sshd.ssh_config_path}"\n'
            f'known_hosts = "{self.sshd.known_hosts_path}"\n[watch]\npython = ["{self.python}"]\n{watch}'
        )

    def snapshot(self, *labels: str) -> None:
        argv = ["snapshot", "testhost", *[a for label in labels for a in ("--label", label)], "--json"]
        assert main(argv) in (0, 3)

    def first_change(self, capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
        capsys.readouterr()
        assert main(["diff", "testhost@good", "testhost@latest", "--json"]) == 2
        changes: list[dict[str, object]] = json.loads(capsys.readouterr().out)["changes"]
        return changes[0]


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Host]:
    with sshd_with_home(tmp_path) as (server, home):
        monkeypatch.chdir(tmp_path)
        yield Host(tmp_path, home, server, make_gpu_venv(tmp_path / "venv"))


def build_flashinfer_op(home: Path, version: str, built: float) -> Path:
    """fused_moe_120 as FlashInfer's JIT leaves it: 64 objects and the linked module."""
    build = home / ".cache" / "flashinfer" / version / "121a" / "cached_ops" / "fused_moe_120"
    build.mkdir(parents=True)
    (build / "build.ninja").write_text("rule nvcc\n")
    for i in range(64):
        (build / f"moe_kernel_{i}.cuda.o").write_bytes(b"o" * (1000 + i))
    (build / "fused_moe_120.so").write_bytes(b"so" * 4000)
    for path in build.iterdir():
        os.utime(path, (built, built))
    return build


def test_stale_flashinfer_cache_after_a_same_version_reinstall(host: Host, capsys: pytest.CaptureFixture[str]) -> None:
    now = time.time()
    site = site_packages(host.root / "venv")
    dist_info = next(site.glob("flashinfer_python-*.dist-info"))
    os.utime(dist_info, (now - 7200, now - 7200))  # installed two hours ago
    build = build_flashinfer_op(host.home, "0.4.1", built=now - 3600)  # built an hour later
    host.configure('caches = ["~/.cache/flashinfer"]\nprocesses = []\n')
    host.snapshot("good")
    # pip install --force-reinstall of a rebuilt wheel with the same version...
    shutil.rmtree(dist_info)
    write_dist_info(site, "flashinfer_python", "flashinfer-python", "0.4.1", ["torch", "numpy"],
                    {"flashinfer/__init__.py": '__version__ = "0.4.1"\n# rebuilt\n'})
    installed = (site / dist_info.name).stat().st_mtime
    # ...and ninja, trusting mtimes, rebuilds 5 of the 65 objects and relinks.
    for i in range(4):
        fresh = build / f"moe_kernel_{i}.cuda.o.tmp"
        fresh.write_bytes(b"n" * (2000 + i))
        os.replace(fresh, build / f"moe_kernel_{i}.cuda.o")
    (build / "fused_moe_120.so.tmp").write_bytes(b"SO" * 4001)
    os.replace(build / "fused_moe_120.so.tmp", build / "fused_moe_120.so")
    newest = (build / "fused_moe_120.so").stat().st_mtime
    host.snapshot()
    first = host.first_change(capsys)
    assert first["severity"] == "high" and first["category"] == "file"
    assert first["explanation"].startswith(
        f"~/.cache/flashinfer/0.4.1: 5 of 65 objects changed (newest {when(newest)}) while flashinfer-python 0.4.1 "
        f"was reinstalled (installed {when(installed)}): 60 of 65 objects predate that install")
    assert "known-bad state (predicted). Fix: rm -rf " in first["explanation"]  # the directory to clear
    assert main(["show", "testhost@latest"]) == 0
    assert "~/.cache/flashinfer  66 files" in capsys.readouterr().out


def test_etc_nccl_conf_setting_a_variable(host: Host, capsys: pytest.CaptureFixture[str]) -> None:
    etc = host.root / "etc" / "nccl.conf"  # stands in for /etc/nccl.conf
    etc.parent.mkdir()
    host.configure(f'nccl_conf = ["{etc}", "~/.nccl.conf"]\nprocesses = []\ncaches = []\n')
    (host.home / ".nccl.conf").write_text("NCCL_DEBUG=WARN\n")
    host.snapshot("good")
    etc.write_text("# baked into the image\nNCCL_IB_USE_INLINE=1\n")
    host.snapshot()
    first = host.first_change(capsys)
    assert (first["category"], first["item"], first["severity"]) == ("env", "NCCL_IB_USE_INLINE", "high")
    assert first["explanation"] == f"NCCL_IB_USE_INLINE=1 set in {etc} (was not set)"
    assert main(["show", "testhost@latest"]) == 0
    assert "NCCL_IB_USE_INLINE=1" in capsys.readouterr().out


@pytest.fixture
def hub_server(host: Host) -> Iterator[tuple[Host, Path, str]]:
    """A stand-in `python -m sglang.launch_server --model-path Qwen/Qwen3-8B` whose
    environment puts the hub cache in HF_HOME, as a serving container does."""
    package = sglang_checkout(host.root / "venv") / "python" / "sglang"
    (package / "launch_server.py").write_text("import time\nwhile True:\n    time.sleep(1)\n")
    hf_home = host.root / "hf"
    name = f"dw-{uuid.uuid4().hex[:12]}"  # no other process on this machine matches
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HF_HOME": str(hf_home)}
    argv = [str(host.python), "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B",
            "--served-model-name", name]
    proc = subprocess.Popen(argv, env=env, cwd=host.root, start_new_session=True)
    time.sleep(0.3)  # let it exec, so /proc shows its argv
    try:
        yield host, hf_home / "hub", f"sglang.launch_server --model-path Qwen/Qwen3-8B --served-model-name {name}"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_hub_revision_update_changing_generation_config(
    hub_server: tuple[Host, Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    host, cache, pattern = hub_server
    old = write_revision(cache, "Qwen/Qwen3-8B", model_files())
    host.configure(f'processes = ["{pattern}"]\ncaches = []\n')
    host.snapshot("good")
    new = write_revision(cache, "Qwen/Qwen3-8B", model_files({**GENERATION, "temperature": 1.0}))
    host.snapshot()
    first = host.first_change(capsys)
    assert (first["category"], first["severity"]) == ("file", "high")
    assert first["explanation"] == (f"Qwen/Qwen3-8B generation_config.json changed (revision {old[:7]}… → "
                                    f"{new[:7]}…): temperature 0.6 → 1.0")
