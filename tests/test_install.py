"""The README's install-and-run command, on the system Python of a Debian/Ubuntu machine.

System Pythons refuse `pip install` outside a virtualenv (PEP 668); install.sh makes one.
This runs the README's one line as a newcomer would, against the real /usr/bin/python3.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SYSTEM_PYTHON = Path("/usr/bin/python3")


def readme_install_line() -> str:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Install and run (one command)", 1)[1]
    return re.search(r"```\n(.+?)\n```", section, re.S).group(1).strip()  # type: ignore[union-attr]


@pytest.mark.skipif(not SYSTEM_PYTHON.exists(), reason="no system /usr/bin/python3 on this machine")
def test_readme_install_and_run_works_on_the_system_python(tmp_path: Path) -> None:
    managed = list(Path("/usr/lib").glob("python3*/EXTERNALLY-MANAGED"))
    home = tmp_path / "home"
    home.mkdir()
    env = {
        "HOME": str(home),
        "PATH": f"{home / '.local' / 'bin'}:/usr/local/bin:/usr/bin:/bin",
        "PYTHON": str(SYSTEM_PYTHON),
        # The pip cache and index settings of this machine, so CI does not download twice.
        **{k: v for k, v in os.environ.items() if k.startswith("PIP_")},
    }
    line = readme_install_line()
    assert "install.sh" in line and "pip install" not in line.split("&&")[0]
    workdir = tmp_path / "work"
    workdir.mkdir()
    result = subprocess.run(
        ["sh", "-c", line.replace("./install.sh", str(ROOT / "install.sh"))],
        cwd=workdir, env=env, capture_output=True, text=True, timeout=600,
    )
    assert "externally-managed-environment" not in result.stderr, result.stderr
    assert result.returncode == 0, result.stdout + result.stderr
    assert "installed driftwatch" in result.stdout
    assert "Driver and CUDA" in result.stdout or "Probes that failed" in result.stdout  # the show page
    assert list((workdir / "snapshots").rglob("*.json"))
    # The HTML templates are package data: an installed (not editable) copy renders a page.
    report = subprocess.run(
        [str(home / ".local" / "bin" / "driftwatch"), "diff", "local@latest", "local@latest", "--html", "diff.html"],
        cwd=workdir, env=env, capture_output=True, text=True, timeout=120,
    )
    assert report.returncode == 0, report.stdout + report.stderr
    assert "<h1>driftwatch diff</h1>" in (workdir / "diff.html").read_text(encoding="utf-8")
    if not managed:
        pytest.skip("this system Python is not externally managed: the PEP 668 case was not exercised")
