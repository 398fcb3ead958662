"""Fixtures shared by the probe tests."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

FAKE_NVIDIA_SMI = Path(__file__).resolve().parents[1] / "fakes" / "nvidia-smi"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty home directory as $HOME: where target-side scripts expand ``~`` and the
    login shell reads its profile."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    return home


@pytest.fixture
def fake_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Put the fake nvidia-smi first on PATH, in a folder whose unique name marks its
    processes; each call's arguments go to ``calls.log`` beside that folder."""
    bin_dir = tmp_path / f"fakebin-{uuid.uuid4().hex}"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").symlink_to(FAKE_NVIDIA_SMI)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}")
    monkeypatch.setenv("FAKE_NVIDIA_SMI_LOG", str(tmp_path / "calls.log"))
    for name in ("FAKE_NVIDIA_SMI_PHASE", "FAKE_NVIDIA_SMI_REJECT", "FAKE_NVIDIA_SMI_HANG",
                 "FAKE_NVIDIA_SMI_DELAY"):
        monkeypatch.delenv(name, raising=False)
    return bin_dir
