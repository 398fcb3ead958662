"""The caches, nccl_conf and models target scripts give the same report on the oldest
Pythons a GPU host may run as on this one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from driftwatch.probes import caches, models
from driftwatch.probes.base import load_script
from tests.hfcache import model_files, write_revision
from tests.venvs import old_pythons


def run(python: str, script: str, request: dict[str, Any]) -> Any:
    out = subprocess.run([python, "-I", "-S", "-c", load_script(script)], input=json.dumps(request).encode(),
                         capture_output=True, check=True, timeout=60).stdout
    return json.loads(out)


def requests(root: Path) -> dict[str, dict[str, Any]]:
    cache = root / "flashinfer"
    (cache / "0.6.12" / "90a").mkdir(parents=True)
    (cache / "0.6.12" / "90a" / "op.so").write_bytes(b"so")
    (root / "nccl.conf").write_text("NCCL_DEBUG=INFO\n")
    write_revision(root / "hub", "Qwen/Qwen3-8B", model_files())
    return {
        "caches_collect.py": {
            "roots": [{"key": "c", "path": str(cache), "reuse": {}}], "walked": [], "max_entries": 1000,
            "seconds": 30, "hashed_re": caches.HASHED_RE, "max_named": 256,
            "object_suffixes": list(caches.OBJECT_SUFFIXES), "max_objects": 512, "max_dirs": 4096,
            "max_objects_total": 8192, "max_dirs_total": 32768},
        "nccl_conf_collect.py": {"files": [{"key": "f", "path": str(root / "nccl.conf")}], "max_bytes": 65536},
        "models_collect.py": {
            "models": [models.Model("Qwen/Qwen3-8B", "hub", hub_cache=str(root / "hub")).request()], "known": {},
            "small": list(models.SMALL_FILES), "weights": list(models.WEIGHT_SUFFIXES),
            "max_small_bytes": 1 << 20, "max_values_bytes": 1 << 20, "max_values": 128, "max_string": 160,
            "max_files": 100, "max_depth": 3, "seconds": 30},
    }


@pytest.mark.parametrize("python", old_pythons() or [pytest.param(None, marks=pytest.mark.skip("no python3.8/3.9 here"))])
def test_scripts_report_the_same_on_old_pythons(python: str, tmp_path: Path) -> None:
    for script, request in requests(tmp_path).items():
        assert run(python, script, request) == run(sys.executable, script, request), script
