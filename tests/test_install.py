"""The README's install-and-run command, on the system Python of a Debian/Ubuntu machine,
and every scheduling recipe the README shows (cron, systemd) run as written.

System Pythons refuse `pip install` outside a virtualenv (PEP 668); install.sh makes one.
This runs the README's one line as a newcomer would, against the real /usr/bin/python3.
The recipes are extracted from README.md and run in the environment their scheduler gives
(cron: PATH=/usr/bin:/bin; systemd: its default PATH, no shell), with only this machine's
places put in for the README's (/srv/driftwatch, the webhook, the textfile folder).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.hermetic import watch_lines
from tests.hooks import Hook

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


def readme() -> str:
    return (ROOT / "README.md").read_text()


def blocks(after: str) -> list[str]:
    """The code blocks of the README section headed ``after``."""
    section = readme().split(after, 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```[a-z]*\n(.+?)\n```", section, re.S)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """install.sh as the README's systemd recipe runs it: DRIFTWATCH_HOME, DRIFTWATCH_BIN;
    the folder the link went to."""
    [line] = [b for b in blocks("## Cron: `driftwatch check`") if "./install.sh" in b]
    env_words = dict(w.split("=", 1) for w in shlex.split(line.split("#")[0])[:-1])
    assert env_words["DRIFTWATCH_BIN"] == "/usr/local/bin"
    root = tmp_path_factory.mktemp("system")
    bin_dir = root / "usr-local-bin"
    env = {"HOME": str(root), "PATH": os.environ["PATH"], "DRIFTWATCH_HOME": str(root / "opt"),
           "DRIFTWATCH_BIN": str(bin_dir), "PYTHON": sys.executable,
           **{k: v for k, v in os.environ.items() if k.startswith("PIP_")}}
    done = subprocess.run(["sh", str(ROOT / "install.sh")], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (bin_dir / "driftwatch").exists()
    return bin_dir


def two_local_hosts(work: Path) -> None:
    """gpu01 and gpu02 of the recipes are this machine, each with a good baseline."""
    (work / "driftwatch.toml").write_text(
        '[hosts.gpu01]\naddress = "local"\n[hosts.gpu02]\naddress = "local"\n[groups]\nblackwell = ["gpu01", "gpu02"]\n'
        "[watch]\n" + watch_lines()
    )


def test_the_cron_line_runs_as_written(installed: Path, tmp_path: Path, hook: Hook) -> None:
    [block] = [b for b in blocks("## Cron: `driftwatch check`") if b.startswith("# m")]
    line = block.splitlines()[-1]
    command = line.split(None, 5)[5]  # after the five time fields
    home = installed.parent  # what install.sh linked for this user: $HOME/.local/bin/driftwatch
    (home / ".local" / "bin").mkdir(parents=True, exist_ok=True)
    link = home / ".local" / "bin" / "driftwatch"
    if not link.exists():
        link.symlink_to(installed / "driftwatch")
    work = tmp_path / "srv"
    work.mkdir()
    two_local_hosts(work)
    cron_env = {"HOME": str(home), "LOGNAME": "root", "SHELL": "/bin/sh", "PATH": "/usr/bin:/bin"}
    good = subprocess.run([str(link), "snapshot", "gpu01", "gpu02", "--label", "good"], cwd=work, env=cron_env,
                          capture_output=True, text=True, timeout=300)
    assert good.returncode in (0, 3), good.stderr
    command = (command.replace("/srv/driftwatch", str(work))
               .replace("https://hooks.slack.com/services/T000/B000/XXXX", hook.url)
               .replace("/var/lib/node_exporter/textfile_collector", str(tmp_path / "textfile")))
    (tmp_path / "textfile").mkdir()
    done = subprocess.run(["/bin/sh", "-c", command], env=cron_env, capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, 2), done.stdout + done.stderr  # 127: not on cron's PATH
    assert sorted(p.name for p in (tmp_path / "textfile").iterdir()) == ["driftwatch_gpu01.prom", "driftwatch_gpu02.prom"]


def test_the_systemd_units_run_as_written(installed: Path, tmp_path: Path) -> None:
    units = "\n".join(b for b in blocks("## Cron: `driftwatch check`") + blocks("### A shared bucket") if "ExecStart=" in b)
    starts = re.findall(r"^ExecStart=(.+)$", units, re.M)
    assert len(starts) == 2
    assert "SuccessExitStatus=2" in units and re.search(r"^WorkingDirectory=/srv/driftwatch$", units, re.M)
    work = tmp_path / "srv"
    work.mkdir()
    two_local_hosts(work)
    (tmp_path / "textfile").mkdir()
    page = tmp_path / "page-oncall"
    page.write_text("#!/bin/sh\ncat > /dev/null\n")
    page.chmod(0o755)
    config = tmp_path / "etc-driftwatch.toml"
    config.write_text(f'store = "{tmp_path / "bucket"}"\n[watch]\n' + watch_lines())
    # systemd: no shell, its own PATH, HOME of the unit's user.
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": str(tmp_path)}
    for start in starts:
        argv = shlex.split(start)
        assert argv[0] == "/usr/local/bin/driftwatch"  # what the README's install line makes
        argv = [str(installed / "driftwatch"), *(
            w.replace("/usr/local/bin/page-oncall", str(page)).replace("/etc/driftwatch.toml", str(config))
             .replace("/var/lib/node_exporter/textfile_collector", str(tmp_path / "textfile")) for w in argv[1:])]
        assert subprocess.run([argv[0], "snapshot", *argv[2:3], "--label", "good",
                               *(["--config", str(config)] if str(config) in argv else [])],
                              cwd=work, env=env, capture_output=True, timeout=300).returncode in (0, 3)
        done = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode in (0, 2), done.stdout + done.stderr  # 2 is SuccessExitStatus


def test_the_slurm_settings_name_what_install_sh_makes_for_root() -> None:
    [settings] = [b for b in blocks("### Slurm: drain a node that drifted") if "DRIFTWATCH=" in b]
    [path] = re.findall(r"^DRIFTWATCH=(\S+)$", settings, re.M)
    assert path == "/root/.local/bin/driftwatch"  # install.sh run as root: $HOME/.local/bin
    assert 'bin=${DRIFTWATCH_BIN:-"$HOME/.local/bin"}' in (ROOT / "install.sh").read_text()
