"""The python probe against real virtual environments, and its parser and collector."""

from __future__ import annotations

import ast
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from driftwatch.collect import run_probe
from driftwatch.model import ProbeStatus
from driftwatch.probes.base import ProbeContext, ProbeError, ProbeTimeout
from driftwatch.probes.base import collector_script, load_script
from driftwatch.probes.python import REPORT_MARKER, PythonProbe, parse_python_report
from driftwatch.settings import WatchSettings
from driftwatch.transport.local import LocalTransport
from tests.venvs import git, make_gpu_venv, old_pythons, sglang_checkout, site_packages, write_dist_info

COLLECTOR = Path(__file__).resolve().parents[2] / "driftwatch" / "probes" / "scripts" / "python_collect.py"


@pytest.fixture(scope="session")
def gpu_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv shared by the read-only tests; returns its python."""
    return make_gpu_venv(tmp_path_factory.mktemp("gpu") / "venv")


def collect(*interpreters: str, timeout: float = 20.0) -> dict[str, Any]:
    ctx = ProbeContext(transport=LocalTransport(), watch=WatchSettings(python=list(interpreters)), timeout=timeout)
    return PythonProbe().collect(ctx)


def load_collector() -> ModuleType:
    """The collector as the target runs it (prelude + script), as a module."""
    module = ModuleType("python_collect")
    exec(compile(collector_script("python_collect.py"), str(COLLECTOR), "exec"), module.__dict__)
    return module


def test_every_distribution_with_its_facts(gpu_venv: Path) -> None:
    venv = gpu_venv.parent.parent
    site = site_packages(venv)
    entry = collect(str(gpu_venv))["interpreters"][str(gpu_venv)]

    assert entry["error"] is None
    assert entry["executable"] == str(gpu_venv)
    assert entry["prefix"] == str(venv)
    assert entry["version"] == platform.python_version()
    dists = entry["distributions"]
    assert set(dists) == {"sglang", "sgl-kernel", "torch", "flashinfer-python", "nvidia-nccl-cu12", "nvidia-cudnn-cu12"}

    kernel = dists["sgl-kernel"]
    dist_info = site / "sgl_kernel-0.3.16.post4.dist-info"
    assert kernel == {
        "name": "sgl-kernel",
        "version": "0.3.16.post4",
        "installed_at": dist_info.stat().st_mtime,
        "installer": "pip",
        "editable": False,
        "direct_url": None,
        "source_commit": None,
        "record_sha256": hashlib.sha256((dist_info / "RECORD").read_bytes()).hexdigest(),
        "requires": [],
        "location": str(site),
    }
    assert dists["torch"]["version"] == "2.8.0+cu128"
    assert (
        'nvidia-nccl-cu12==2.27.3; platform_system == "Linux" and platform_machine == "x86_64"'
        in dists["torch"]["requires"]
    )
    assert dists["torch"]["requires"][-1] == 'opt-einsum>=3.3; extra == "opt-einsum"'  # verbatim, in order
    assert dists["nvidia-nccl-cu12"]["version"] == "2.27.3"
    assert dists["nvidia-cudnn-cu12"]["requires"] == ["nvidia-cublas-cu12"]
    assert dists["flashinfer-python"]["name"] == "flashinfer-python"


def test_editable_install_reports_its_checkout_head(gpu_venv: Path) -> None:
    checkout = sglang_checkout(gpu_venv.parent.parent)
    sglang = collect(str(gpu_venv))["interpreters"][str(gpu_venv)]["distributions"]["sglang"]
    assert sglang["editable"] is True
    assert sglang["direct_url"] == (checkout / "python").as_uri()
    # direct_url points at sglang/python; the commit comes from sglang/.git above it.
    assert sglang["source_commit"] == git(checkout, "rev-parse", "HEAD")
    assert len(sglang["source_commit"]) == 40


def test_torch_is_never_imported(gpu_venv: Path) -> None:
    # Its __init__ raises: the venv's own python proves it, the probe still succeeds.
    broken = subprocess.run([str(gpu_venv), "-c", "import torch"], check=False, capture_output=True, text=True)
    assert "must never import torch" in broken.stderr
    assert "torch" in collect(str(gpu_venv))["interpreters"][str(gpu_venv)]["distributions"]


def test_record_change_changes_record_sha256(tmp_path: Path) -> None:
    python = make_gpu_venv(tmp_path / "venv")
    record = site_packages(tmp_path / "venv") / "sgl_kernel-0.3.16.post4.dist-info" / "RECORD"
    before = collect(str(python))["interpreters"][str(python)]["distributions"]["sgl-kernel"]
    # Same version, different files: a reinstall from another build of the same wheel.
    record.write_text(record.read_text().replace("sgl_kernel/version.py,sha256=", "sgl_kernel/version.py,sha256=X"))
    after = collect(str(python))["interpreters"][str(python)]["distributions"]["sgl-kernel"]
    assert after["version"] == before["version"] == "0.3.16.post4"
    assert after["record_sha256"] != before["record_sha256"]
    assert after["record_sha256"] == hashlib.sha256(record.read_bytes()).hexdigest()


def test_a_fifo_or_a_huge_file_in_a_dist_info_costs_only_that_distribution(tmp_path: Path) -> None:
    # A RECORD that is a FIFO blocked the read forever (the probe timed out, every package
    # lost); a METADATA of 200 MiB was read whole into memory. Both are hostile-host files.
    python = make_gpu_venv(tmp_path / "venv")
    site = site_packages(tmp_path / "venv")
    record = site / "sgl_kernel-0.3.16.post4.dist-info" / "RECORD"
    record.unlink()
    os.mkfifo(record)
    [metadata] = site.glob("torch-*.dist-info/METADATA")
    with open(metadata, "ab") as handle:
        handle.truncate(200 * 1024 * 1024)  # sparse: its headers, then 200 MiB of zeros
    started = time.monotonic()
    interpreter = collect(str(python), timeout=10.0)["interpreters"][str(python)]
    assert time.monotonic() - started < 8
    dists = interpreter["distributions"]
    assert dists["sgl-kernel"]["version"] == "0.3.16.post4" and dists["sgl-kernel"]["record_sha256"] is None
    assert dists["torch"]["version"].startswith("2.")
    assert dists["sglang"]["record_sha256"]  # the others as ever


def test_first_distribution_on_sys_path_wins(gpu_venv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # PYTHONPATH comes before site-packages: its older sgl-kernel is what `import` gets.
    early = tmp_path / "early"
    write_dist_info(early, "sgl_kernel", "sgl-kernel", "0.2.0", [], {"sgl_kernel/__init__.py": ""})
    monkeypatch.setenv("PYTHONPATH", str(early))
    dists = collect(str(gpu_venv))["interpreters"][str(gpu_venv)]["distributions"]
    assert dists["sgl-kernel"]["version"] == "0.2.0"
    assert dists["sgl-kernel"]["location"] == str(early)
    assert len([d for d in dists.values() if d["name"] == "sgl-kernel"]) == 1


def test_git_install_reports_pips_commit(gpu_venv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # `pip install git+https://...` records the commit in vcs_info; no checkout to read.
    commit = "9f1c" + "0" * 36
    direct: dict[str, object] = {
        "url": "https://github.com/sgl-project/sglang.git",
        "vcs_info": {"vcs": "git", "commit_id": commit},
    }
    write_dist_info(tmp_path, "sglang_router", "sglang-router", "0.2.1", [], {}, direct_url=direct)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    router = collect(str(gpu_venv))["interpreters"][str(gpu_venv)]["distributions"]["sglang-router"]
    assert router["editable"] is False
    assert router["direct_url"] == "https://github.com/sgl-project/sglang.git"
    assert router["source_commit"] == commit



def test_credentials_pip_recorded_are_redacted(gpu_venv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # `pip install git+https://user:token@host/...` keeps the token in direct_url.json.
    direct: dict[str, object] = {
        "url": "https://builduser:SEKRIT-pw@git.example.com/org/router.git",
        "vcs_info": {"vcs": "git", "commit_id": "9f1c" + "0" * 36},
    }
    requires = ["kernels @ git+https://ci:SEKRIT-req@git.example.com/org/kernels.git"]
    write_dist_info(tmp_path, "sglang_router", "sglang-router", "0.2.1", requires, {}, direct_url=direct)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    router = collect(str(gpu_venv))["interpreters"][str(gpu_venv)]["distributions"]["sglang-router"]
    assert router["direct_url"] == "https://builduser:<redacted>@git.example.com/org/router.git"
    assert router["requires"] == ["kernels @ git+https://ci:<redacted>@git.example.com/org/kernels.git"]


def test_working_directory_is_not_part_of_the_environment(
    gpu_venv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_dist_info(tmp_path, "stray", "stray", "1.0", [], {})
    monkeypatch.chdir(tmp_path)
    assert "stray" not in collect(str(gpu_venv))["interpreters"][str(gpu_venv)]["distributions"]


def test_missing_interpreter_is_an_entry_with_error(gpu_venv: Path, tmp_path: Path) -> None:
    missing = str(tmp_path / "nope" / "python3")
    interpreters = collect(str(gpu_venv), missing)["interpreters"]
    assert list(interpreters) == [str(gpu_venv), missing]
    assert interpreters[missing] == {"error": interpreters[missing]["error"]}  # error and nothing else
    assert "not found" in interpreters[missing]["error"]
    assert interpreters[str(gpu_venv)]["error"] is None
    assert "torch" in interpreters[str(gpu_venv)]["distributions"]


def test_all_interpreters_failing_fails_the_probe(tmp_path: Path) -> None:
    with pytest.raises(ProbeError, match="no interpreter could be read"):
        collect(str(tmp_path / "a" / "python3"), str(tmp_path / "b" / "python3"))
    ctx = ProbeContext(transport=LocalTransport(), watch=WatchSettings(python=[str(tmp_path / "python3")]))
    record = run_probe(PythonProbe(), ctx)
    assert record.status is ProbeStatus.error


def test_crashing_interpreter_reports_its_last_error_line(gpu_venv: Path, tmp_path: Path) -> None:
    fake = tmp_path / "python3"
    fake.write_text("#!/bin/sh\necho 'Fatal Python error: init_fs_encoding' >&2\nexit 1\n")
    fake.chmod(0o755)
    interpreters = collect(str(gpu_venv), str(fake))["interpreters"]
    assert interpreters[str(fake)] == {"error": "exit 1: Fatal Python error: init_fs_encoding"}


def test_hung_interpreter_times_out(tmp_path: Path) -> None:
    fake = tmp_path / "python3"
    fake.write_text("#!/bin/sh\nexec sleep 30\n")
    fake.chmod(0o755)
    start = time.monotonic()
    with pytest.raises(ProbeTimeout):
        collect(str(fake), timeout=1.0)
    assert time.monotonic() - start < 10


def test_interpreters_run_concurrently(tmp_path: Path) -> None:
    slow = []
    for name in ("a", "b", "c"):
        fake = tmp_path / name
        fake.write_text(f"#!/bin/sh\nsleep 1\nexec {sys.executable} -\n")
        fake.chmod(0o755)
        slow.append(str(fake))
    start = time.monotonic()
    interpreters = collect(*slow)["interpreters"]
    assert time.monotonic() - start < 2.5
    assert all(entry["error"] is None for entry in interpreters.values())


def test_tilde_interpreter_expands_on_the_target(
    gpu_venv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "ml-env").symlink_to(gpu_venv.parent.parent)
    monkeypatch.setenv("HOME", str(tmp_path))
    entry = collect("~/ml-env/bin/python")["interpreters"]["~/ml-env/bin/python"]
    assert entry["error"] is None and "sglang" in entry["distributions"]


def test_system_python_is_described(gpu_venv: Path) -> None:
    entry = collect(sys.executable)["interpreters"][sys.executable]
    assert entry["error"] is None
    assert "pytest" in entry["distributions"]
    assert entry["distributions"]["pytest"]["version"] == importlib.metadata.version("pytest")


def test_facts_are_json_and_the_record_is_ok(gpu_venv: Path) -> None:
    ctx = ProbeContext(transport=LocalTransport(), watch=WatchSettings(python=[str(gpu_venv)]), timeout=20)
    record = run_probe(PythonProbe(), ctx)
    assert record.status is ProbeStatus.ok
    assert json.loads(json.dumps(record.facts)) == record.facts


# --- the parser -------------------------------------------------------------------


REPORT: dict[str, Any] = {
    "executable": "/root/ml-env/bin/python3",
    "version": "3.10.12",
    "prefix": "/root/ml-env",
    "distributions": {
        "torch": {
            "name": "torch",
            "version": "2.8.0+cu128",
            "installed_at": 1760000000.5,
            "installer": "uv",
            "editable": False,
            "direct_url": None,
            "source_commit": None,
            "record_sha256": "ab" * 32,
            "requires": ["filelock"],
            "location": "/root/ml-env/lib/python3.10/site-packages",
        },
        "sglang": {
            "name": "sglang",
            "version": "0.5.6",
            "installed_at": 1760000001.0,
            "installer": "pip",
            "editable": True,
            "direct_url": "file:///root/sglang/python",
            "source_commit": "9f" * 20,
            "record_sha256": None,
            "requires": [],
            "location": "/root/ml-env/lib/python3.10/site-packages",
        },
    },
}


def test_parse_report_after_noise_from_pth_files() -> None:
    text = "Warning: some .pth printed this\n\n" + REPORT_MARKER + json.dumps(REPORT) + "\n"
    entry = parse_python_report(text)
    assert entry["error"] is None
    assert entry["executable"] == "/root/ml-env/bin/python3"
    assert list(entry["distributions"]) == ["sglang", "torch"]  # stable order
    assert entry["distributions"]["torch"] == REPORT["distributions"]["torch"]


def test_parse_report_rejects_garbage() -> None:
    with pytest.raises(ProbeError, match="no report"):
        parse_python_report("Traceback (most recent call last):\n")
    with pytest.raises(ProbeError, match="unreadable"):
        parse_python_report(REPORT_MARKER + '{"executable": ')
    with pytest.raises(ProbeError, match="no distributions"):
        parse_python_report(REPORT_MARKER + "{}")


# --- the collector, run here --------------------------------------------------------


def test_collector_is_shipped_as_package_data() -> None:
    assert load_script("python_collect.py") == COLLECTOR.read_text()


def test_collector_is_python38_syntax() -> None:
    ast.parse(collector_script("python_collect.py"), feature_version=(3, 8))


@pytest.mark.parametrize(
    "python", old_pythons() or [pytest.param(None, marks=pytest.mark.skip("no python3.8/3.9 here"))]
)
def test_collector_runs_on_old_pythons(python: str) -> None:
    entry = collect(python)["interpreters"][python]
    assert entry["error"] is None and entry["version"].startswith(("3.8.", "3.9."))


def test_git_head_loose_packed_detached_and_worktree(tmp_path: Path) -> None:
    collector = load_collector()
    repo = tmp_path / "repo"
    (repo / "python").mkdir(parents=True)
    (repo / "python" / "x.py").write_text("x = 1\n")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "one")
    head = git(repo, "rev-parse", "HEAD")
    assert collector.git_head(str(repo / "python")) == head  # loose ref, from a subdirectory

    git(repo, "pack-refs", "--all")
    assert not (repo / ".git" / "refs" / "heads" / "main").exists()
    assert collector.git_head(str(repo)) == head  # packed-refs

    git(repo, "commit", "-q", "--allow-empty", "-m", "two")
    second = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "--detach", head)
    assert collector.git_head(str(repo)) == head  # detached HEAD

    git(repo, "worktree", "add", "-q", str(tmp_path / "wt"), "main")
    assert (tmp_path / "wt" / ".git").is_file()
    assert collector.git_head(str(tmp_path / "wt")) == second  # .git file + commondir

    (tmp_path / "plain").mkdir()
    assert collector.git_head(str(tmp_path / "plain")) is None


def test_git_head_of_unborn_branch_is_none(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    assert load_collector().git_head(str(tmp_path)) is None


def test_normalize_is_pep503() -> None:
    collector = load_collector()
    assert collector.normalize("Flashinfer_Python") == "flashinfer-python"
    assert collector.normalize("sgl.kernel__x") == "sgl-kernel-x"


def test_collector_survives_undecodable_paths(tmp_path: Path) -> None:
    # A site directory whose name is not UTF-8: paths come back with U+FFFD, not a crash.
    site = os.fsencode(str(tmp_path)) + b"/caf\xe9"
    dist_info = site + b"/cafe-1.0.dist-info"
    os.makedirs(dist_info)
    with open(dist_info + b"/METADATA", "wb") as f:
        f.write(b"Metadata-Version: 2.1\nName: cafe\nVersion: 1.0\n\n")
    env = {**os.environb, b"PYTHONPATH": site}
    out = subprocess.run([sys.executable, "-"], input=collector_script("python_collect.py").encode(), capture_output=True, env=env, check=True)
    entry = parse_python_report(out.stdout.decode("utf-8", "replace"))
    assert entry["distributions"]["cafe"]["version"] == "1.0"
    assert entry["distributions"]["cafe"]["location"] == str(tmp_path) + "/caf\ufffd"


def test_how_imports_resolve_pythonpath_copy_pth_code_and_user_site(tmp_path: Path) -> None:
    """The collector in a real venv: a torch without metadata on PYTHONPATH is what `import torch`
    finds, a .pth line that imports is recorded (a path-only .pth is not), and the user site of a
    venv without system site packages is off."""
    import os
    import subprocess

    from driftwatch.probes.base import collector_script
    from driftwatch.probes.python import parse_python_report
    from tests.venvs import make_gpu_venv, site_packages

    python = make_gpu_venv(tmp_path / "venv")
    site = site_packages(tmp_path / "venv")
    (site / "zz_hook.pth").write_text("import os; os.environ.setdefault('HOOKED', '1')\n/opt/extra\n")
    (site / "plain.pth").write_text("/opt/only-a-path\n")
    stale = tmp_path / "src-torch"
    (stale / "torch").mkdir(parents=True)
    (stale / "torch" / "__init__.py").write_text("")
    env = {"PATH": os.environ.get("PATH", "/usr/bin"), "HOME": str(tmp_path / "home"), "PYTHONPATH": str(stale)}
    out = subprocess.run([str(python), "-"], input=collector_script("python_collect.py").encode(), env=env,
                         capture_output=True, check=True).stdout.decode()
    resolution = parse_python_report(out)["resolution"]
    assert resolution["pythonpath"] == str(stale)
    assert resolution["imports"]["torch"] == {"module": "torch", "location": str(stale)}
    assert resolution["pth"] == {str(site / "zz_hook.pth"): {
        "imports": ["import os; os.environ.setdefault('HOOKED', '1')"], "error": None}}
    assert resolution["user_site"]["enabled"] is False and resolution["user_site"]["on_path"] is False
    assert resolution["venv"]["include_system_site_packages"] is False
