"""A working directory whose config snapshots `local`: a real venv, real files, a fake nvidia-smi."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.hermetic import watch_lines
from tests.venvs import make_gpu_venv

FAKES = Path(__file__).parent / "fakes"
H200 = Path(__file__).parent / "fixtures" / "nvidia-smi" / "linux-x86_64__nvidia-h200__590.48.01.txt"


def local_host(root: Path, monkeypatch: pytest.MonkeyPatch, *, watch: str = "", local_name: str = "local") -> Path:
    """Set up ``root`` (the venv at ``root/venv``) and chdir into it; ``watch`` adds lines to ``[watch]``.

    ``local`` is stored as ``local_name`` (``local`` here, so paths and .prom names stay
    short; the push-mode tests store it under a node name, or the hostname with "").
    """
    bin_dir = root / "bin"
    bin_dir.mkdir()
    shutil.copy(FAKES / "nvidia-smi", bin_dir / "nvidia-smi")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_NVIDIA_SMI_CAPTURE", str(H200))
    python = make_gpu_venv(root / "venv")
    src = root / "src"
    src.mkdir()
    (src / "server_args.py").write_text("mem_fraction_static = None\n")
    (root / "driftwatch.toml").write_text(
        (f'local_name = "{local_name}"\n' if local_name else "")
        + 'timeout = 30\n[watch]\n' + watch_lines(f'python = ["{python}"]\nfiles = ["{src}/**/*.py"]\n{watch}')
    )
    monkeypatch.chdir(root)
    return root
