"""What keeps a test to what it made, on a GPU box where servers run (``isolate``).

A test sees none of the machine's SGLang/vLLM servers, ``/etc/nccl.conf``, compile caches
under ``/tmp``, the user's HOME (profiles, ``~/.config/driftwatch``, ``~/.cache``) or its
NCCL/CUDA/HF variables. ``.ci/gpubox`` runs the suite on such a box to prove it.
"""

from __future__ import annotations

import fnmatch
import os
import uuid
from pathlib import Path

import pytest

import driftwatch.settings
from driftwatch.probes.locations import LOCATION_ENV

MARKER_ENV = "DRIFTWATCH_TEST_MARKER"
# Inherited variables a snapshot of `local` would record (the caller's NCCL_*, CUDA_*) or
# that move where caches and configs are read (HF_HOME, TRITON_CACHE_DIR, XDG_*).
MACHINE_ENV = (*driftwatch.settings.DEFAULT_ENV, *LOCATION_ENV, "CUDA_VISIBLE_DEVICES", "XDG_*")


def isolate(home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``home`` as HOME (empty profiles), the machine's variables gone, and the defaults of
    ``[watch]`` reading only what the test makes: processes whose command line holds the
    test's own marker (``marker()``), NCCL config files and the Inductor cache under HOME.
    The same keys go to the HOME's ``~/.config/driftwatch/config.toml`` for a driftwatch
    run in a subprocess, and to a test's own config through ``watch_lines``."""
    for name in (".profile", ".bashrc"):
        (home / name).touch()
    for name in list(os.environ):
        if any(fnmatch.fnmatchcase(name, glob) for glob in MACHINE_ENV):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv(MARKER_ENV, f"dw-test-{uuid.uuid4().hex[:12]}")
    defaults = own_defaults()
    monkeypatch.setattr(driftwatch.settings, "DEFAULT_PROCESSES", defaults["processes"])
    monkeypatch.setattr(driftwatch.settings, "DEFAULT_NCCL_CONF", defaults["nccl_conf"])
    monkeypatch.setattr(driftwatch.settings, "DEFAULT_CACHES", defaults["caches"])
    config = home / ".config" / "driftwatch"
    config.mkdir(parents=True)
    (config / "config.toml").write_text("[watch]\n" + watch_lines())
    return home


def marker() -> str:
    """The running test's process marker: put it in a stand-in server's command line."""
    return os.environ[MARKER_ENV]


def own_defaults() -> dict[str, list[str]]:
    home = os.environ["HOME"]
    return {
        "processes": [marker()],
        "nccl_conf": [f"{home}/etc-nccl.conf", "~/.nccl.conf"],
        "caches": [c.replace("/tmp/", "~/tmp/") for c in driftwatch.settings.DEFAULT_CACHES],
    }


def watch_lines(watch: str = "") -> str:
    """TOML lines for a test's ``[watch]`` table: ``watch`` plus the hermetic default of each
    key it does not set itself."""
    own = {line.split("=", 1)[0].strip() for line in watch.splitlines() if "=" in line}
    extra = "".join(f"{key} = {_toml(values)}\n" for key, values in own_defaults().items() if key not in own)
    return watch + extra


def _toml(values: list[str]) -> str:
    return "[" + ", ".join('"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"' for v in values) + "]"
