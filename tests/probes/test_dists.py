"""The collectors' prelude (scripts/dists.py) against importlib.metadata itself: over real
interpreters and a site directory holding every metadata layout, both must find the same
distributions with the same name, version and requirements."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from driftwatch.probes.base import load_script
from tests.venvs import make_gpu_venv, old_pythons, write_dist_info

REFERENCE = """
import json, sys
from importlib import metadata
if sys.path and sys.path[0] == "":
    del sys.path[0]
found = []
for dist in metadata.distributions():
    meta = dist.metadata
    found.append([str(dist._path), meta.get("Name"), meta.get("Version"), dist.requires])
print(json.dumps(found))
"""

OURS = """
drop_cwd_from_path()
found = []
for path in distribution_paths():
    headers = metadata_headers(path) or {}
    requires = headers.get("requires-dist")
    if requires is None:
        requires = egg_requires(path)
    found.append([path, first(headers, "name"), first(headers, "version"), requires])
print(json.dumps(found))
"""


def run(python: str, script: str, pythonpath: Path | None = None) -> list[list[Any]]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    out = subprocess.run([python, "-"], input=script, capture_output=True, text=True, env=env, check=True, timeout=60)
    found = json.loads(out.stdout)
    if script is REFERENCE:
        for entry in found:
            # Python 3.10+ leaves a space after a URL requirement without a marker; 3.8 none.
            entry[3] = None if entry[3] is None else [req.rstrip() for req in entry[3]]
    return sorted(found)


def both(python: str, pythonpath: Path | None = None) -> tuple[list[list[Any]], list[list[Any]]]:
    return run(python, REFERENCE, pythonpath), run(python, load_script("dists.py") + OURS, pythonpath)


@pytest.fixture(scope="module")
def layouts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A site directory with the layouts pip, setuptools and old eggs leave behind."""
    site = tmp_path_factory.mktemp("site")
    write_dist_info(site, "plain", "plain", "1.0", ["numpy>=1.24", 'torch; extra == "gpu"'], {})
    folded = write_dist_info(site, "folded", "Folded.Name", "2.0rc1", [], {})
    (folded / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: Folded.Name\nVersion: 2.0rc1\nSummary: one\n  two\n"
        "Requires-Dist: a\nRequires-Dist: b ; python_version < '3.9'\n\nRequires-Dist: in-the-body\n"
    )
    egg = site / "legacy-0.3-py3.11.egg-info"
    egg.mkdir()
    (egg / "PKG-INFO").write_text("Metadata-Version: 1.1\nName: legacy\nVersion: 0.3\n")
    (egg / "requires.txt").write_text(
        "six\nurl-dep @ https://example.com/x.tar.gz\n\n[cuda]\ncupy\n[:python_version < \"3.9\"]\n"
        "typing-extensions\n[gpu:sys_platform == \"linux\"]\npynvml\n"
    )
    (site / "single-1.0-py3.11.egg-info").write_text("Metadata-Version: 1.0\nName: single\nVersion: 1.0\n")
    old = site / "old.egg-info"
    old.mkdir()  # no metadata at all: the name comes from the directory
    return site


def test_same_distributions_as_importlib_metadata_in_a_real_venv(tmp_path: Path) -> None:
    reference, ours = both(str(make_gpu_venv(tmp_path / "venv")))
    assert len(reference) >= 6
    assert ours == reference


def test_same_distributions_as_importlib_metadata_in_this_interpreter() -> None:
    reference, ours = both(sys.executable)
    assert any(entry[1] == "pytest" for entry in reference)
    assert ours == reference


def test_same_as_importlib_metadata_for_every_layout(layouts: Path) -> None:
    reference, ours = both(sys.executable, layouts)
    names = {entry[1] for entry in ours}
    assert {"plain", "Folded.Name", "legacy", "single", None} <= names
    assert ours == reference
    legacy = next(entry for entry in ours if entry[1] == "legacy")
    assert legacy[3] == [
        "six",
        "url-dep @ https://example.com/x.tar.gz",  # no trailing space, unlike Python 3.10+
        'cupy; extra == "cuda"',
        'typing-extensions; python_version < "3.9"',
        'pynvml; (sys_platform == "linux") and extra == "gpu"',
    ]
    folded = next(entry for entry in ours if entry[1] == "Folded.Name")
    assert folded[3] == ["a", "b ; python_version < '3.9'"]  # not the body's line


@pytest.mark.parametrize(
    "python", old_pythons() or [pytest.param(None, marks=pytest.mark.skip("no python3.8/3.9 here"))]
)
def test_same_as_importlib_metadata_on_old_pythons(python: str, layouts: Path) -> None:
    reference, ours = both(python, layouts)
    assert ours == reference
