"""`driftwatch diff` on scenario pairs taken with real snapshots of this test host.

Each scenario snapshots `local` (a real venv, a fake nvidia-smi replaying real captures,
real files), changes one thing the way it happens on a GPU host, snapshots again and
reads the report the way the engineer would: the first line must name the cause.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from driftwatch.cli import main
from driftwatch.store import SnapshotStore
from tests.builders import snapshot as built_snapshot
from tests.venvs import record_line, site_packages, write_dist_info

FIXTURES = Path(__file__).parent / "fixtures" / "nvidia-smi"
FAKES = Path(__file__).parent / "fakes"


class Host:
    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.root, self.monkeypatch = root, monkeypatch
        self.venv = root / "venv"
        self.timeout = "30"  # generous: only the hang scenario wants a short deadline
        self.src = root / "src"

    def capture(self, name: str) -> None:
        self.monkeypatch.setenv("FAKE_NVIDIA_SMI_CAPTURE", str(FIXTURES / name))

    def snapshot(self, *args: str) -> None:
        assert main(["snapshot", "local", "--timeout", self.timeout, *args]) in (0, 3)

    def diff(self, *args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
        capsys.readouterr()
        code = main(["diff", "local@good", "local@latest", *args])
        return code, capsys.readouterr().out


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Host:
    from tests.venvs import make_gpu_venv

    h = Host(tmp_path, monkeypatch)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shutil.copy(FAKES / "nvidia-smi", bin_dir / "nvidia-smi")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    h.capture("linux-x86_64__nvidia-h200__590.48.01.txt")
    python = make_gpu_venv(h.venv)
    h.src.mkdir()
    (h.src / "server_args.py").write_text("mem_fraction_static = None\n")
    (h.src / "scheduler.py").write_text("def schedule(): pass\n")
    (tmp_path / "driftwatch.toml").write_text(
        f'timeout = 30\n[watch]\npython = ["{python}"]\nfiles = ["{h.src}/**/*.py"]\nprocesses = []\n'
    )
    monkeypatch.chdir(tmp_path)
    h.snapshot("--label", "good")
    capsys.readouterr()
    return h


def first_change(out: str) -> dict[str, object]:
    return json.loads(out)["changes"][0]


def upgrade_sgl_kernel(h: Host) -> None:
    site = site_packages(h.venv)
    shutil.rmtree(next(site.glob("sgl_kernel-*.dist-info")))
    write_dist_info(site, "sgl_kernel", "sgl-kernel", "0.3.17", [], {"sgl_kernel/__init__.py": "# 0.3.17\n"})


def reinstall_flashinfer(h: Host) -> None:
    # The same version from another build: it ships one more file, and RECORD lists it (with
    # its real hash: a RECORD entry whose file is missing would be a broken install instead).
    site = site_packages(h.venv)
    record = next(site.glob("flashinfer_python-*.dist-info")) / "RECORD"
    (site / "flashinfer" / "jit_cache.so").write_bytes(b"\x7fELF rebuilt\n")
    record.write_text(record.read_text() + record_line(site, "flashinfer/jit_cache.so") + "\n")


def edit_and_revert(h: Host) -> None:
    target = h.src / "server_args.py"
    original = target.read_bytes()
    target.write_text("mem_fraction_static = 0.55  # debug\n")
    target.write_bytes(original)
    os.utime(target, (1_900_000_000, 1_900_000_000))


def edit_and_leave(h: Host) -> None:
    (h.src / "scheduler.py").write_text("def schedule(): print('debug')\n")


def grab_gpu_memory(h: Host) -> None:
    h.monkeypatch.setenv("FAKE_NVIDIA_SMI_PHASE", "load")  # the capture's gpu_burn + memhogs


def nvidia_smi_hangs(h: Host) -> None:
    h.monkeypatch.setenv("FAKE_NVIDIA_SMI_HANG", "1")
    h.timeout = "2"


SCENARIOS: list[tuple[str, Callable[[Host], None], str, str, list[str]]] = [
    ("sgl-kernel upgraded", upgrade_sgl_kernel, "package", "sgl-kernel", ["0.3.16.post4", "0.3.17"]),
    ("flashinfer reinstalled", reinstall_flashinfer, "package", "flashinfer-python", ["reinstalled or rebuilt"]),
    ("file edited and left", edit_and_leave, "file", "scheduler.py", ["scheduler.py"]),
    ("process grabs GPU memory", grab_gpu_memory, "gpu-process", "", ["gpu_burn", "GiB"]),
    # The hang is a symptom: the report heads with it (a recorded change, such as the fake's
    # switch where the login environment shows it, ranks as its cause under it).
    ("nvidia-smi hangs", nvidia_smi_hangs, "probe", "gpu", ["timed out"]),
]


@pytest.mark.parametrize(("name", "change", "category", "item", "words"), SCENARIOS, ids=[s[0] for s in SCENARIOS])
def test_first_line_names_the_cause(
    host: Host,
    capsys: pytest.CaptureFixture[str],
    name: str,
    change: Callable[[Host], None],
    category: str,
    item: str,
    words: list[str],
) -> None:
    change(host)
    host.snapshot()
    code, out = host.diff("--json", capsys=capsys)
    assert code == 2
    first = first_change(out)
    if category == "probe" and first["role"] != "symptom":
        first = next(c for c in json.loads(out)["changes"] if c["role"] == "symptom")
    assert first["category"] == category and item in str(first["item"])
    for word in words:
        assert word in str(first["explanation"])
    # The terminal report says the same first: its headline names that cause.
    _, terminal = host.diff(capsys=capsys)
    report = json.loads(out)
    count = len(report["changes"])
    noun = "1 change" if count == 1 else f"{count} changes"
    symptom = report["summary"]["symptom"]
    if symptom:  # what broke first, then its most likely cause
        assert first["role"] == "symptom" and symptom.startswith("gpu probe timed out")
        assert terminal.splitlines()[0].startswith("gpu probe timed out") and f"({noun})" in terminal.splitlines()[0]
    else:
        assert terminal.splitlines()[0].startswith(noun)
    assert str(first["explanation"])[:40] in terminal.replace("\n", " ")


def reinstall_torch_identically(h: Host) -> None:
    # pip uninstall + install of the same wheel: new dist-info mtime, the same RECORD.
    dist_info = next(site_packages(h.venv).glob("torch-*.dist-info"))
    os.utime(dist_info, (1_900_000_000, 1_900_000_000))


@pytest.mark.parametrize(
    ("change", "category", "words"),
    [(edit_and_revert, "file", "content identical"), (reinstall_torch_identically, "package", "identical files")],
    ids=["file edited and reverted", "identical reinstall"],
)
def test_a_change_that_changes_nothing_is_context_not_drift(
    host: Host, capsys: pytest.CaptureFixture[str], change: Callable[[Host], None], category: str, words: str
) -> None:
    change(host)
    host.snapshot()
    code, out = host.diff("--json", capsys=capsys)
    document = json.loads(out)
    assert code == 0  # not drift: nothing that runs changed
    assert [(c["category"], c["drift"]) for c in document["changes"]] == [(category, False)]
    assert words in document["changes"][0]["explanation"]
    assert document["summary"]["total"] == 0 and document["summary"]["context"] == 1
    code, terminal = host.diff(capsys=capsys)
    assert code == 0 and terminal.startswith("no drift (1 context finding that changes nothing)")
    assert "CONTEXT" in terminal and words in terminal  # still shown: someone touched it
    code, markdown = host.diff("--markdown", capsys=capsys)
    assert code == 0 and "| context |" in markdown


def test_driver_update_is_critical_and_first_of_what_merely_changed(
    host: Host, capsys: pytest.CaptureFixture[str]
) -> None:
    host.capture("linux-x86_64__nvidia-geforce-rtx-2080-super__595.71.05.txt")
    host.snapshot("--label", "good")
    host.capture("linux-x86_64__nvidia-geforce-rtx-2080-super__610.57.04.txt")
    upgrade_sgl_kernel(host)
    host.snapshot()
    code, out = host.diff("--json", capsys=capsys)
    evidence, driver = json.loads(out)["changes"][:2]
    # sgl-kernel 0.3.17 breaks sglang[srt]'s pin: a known-bad state, so it ranks above the
    # driver, which merely changed and leads everything else.
    assert evidence["item"] == "sgl-kernel" and "known-bad state (predicted)" in evidence["explanation"]
    assert code == 2 and driver["category"] == "driver" and driver["severity"] == "critical"
    assert "595.71.05" in str(driver["explanation"]) and "610.57.04" in str(driver["explanation"])


def test_same_host_twice_is_no_drift_in_every_form(host: Host, capsys: pytest.CaptureFixture[str]) -> None:
    host.snapshot()
    assert host.diff(capsys=capsys) == (0, host.diff(capsys=capsys)[1])
    code, out = host.diff(capsys=capsys)
    assert code == 0 and out.startswith("no drift")
    code, out = host.diff("--json", capsys=capsys)
    assert code == 0 and json.loads(out)["changes"] == []
    code, out = host.diff("--markdown", capsys=capsys)
    assert code == 0 and "no drift" in out


def test_three_forms_agree(host: Host, capsys: pytest.CaptureFixture[str]) -> None:
    upgrade_sgl_kernel(host)
    edit_and_leave(host)
    host.snapshot()
    _, as_json = host.diff("--json", capsys=capsys)
    changes = json.loads(as_json)["changes"]
    _, markdown = host.diff("--markdown", capsys=capsys)
    rows = [line for line in markdown.splitlines() if line.startswith("| ") and not line.startswith("| severity")]
    assert len(rows) == len(changes) >= 2
    assert [row.split(" | ")[0].strip("| ") for row in rows] == [c["severity"] for c in changes]
    _, terminal = host.diff(capsys=capsys)
    assert terminal.index("sgl-kernel") < terminal.index("scheduler.py")
    assert f"{len(changes)} changes; most likely cause: {changes[0]['explanation'][:30]}" in terminal


def test_volatile_readings_only_with_all(host: Host, capsys: pytest.CaptureFixture[str]) -> None:
    host.monkeypatch.setenv("FAKE_NVIDIA_SMI_CAPTURE", str(FIXTURES / "linux-x86_64__nvidia-l40s__595.80.txt"))
    host.snapshot("--label", "good")
    host.snapshot()
    assert host.diff(capsys=capsys)[0] == 0
    code, out = host.diff("--all", "--json", capsys=capsys)
    assert code == 2 and {c["severity"] for c in json.loads(out)["changes"]} == {"info"}


def hostile_pair(store: SnapshotStore) -> None:
    name = "[bold red]evil[/]\x1b[2J\x1b]0;pwned\x07"
    dist = {"name": name, "version": "1.0", "requires": []}
    old = built_snapshot("gpu01", labels=["good"], python={"interpreters": {"python3": {"distributions": {}}}})
    new = built_snapshot("gpu01", minutes=1, python={"interpreters": {"python3": {"distributions": {name: dist}}}})
    store.save(old)
    store.save(new)


def test_host_text_prints_literally(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    hostile_pair(SnapshotStore(tmp_path / "snapshots"))
    assert main(["diff", "gpu01@good", "gpu01@latest"]) == 2
    out = capsys.readouterr().out
    assert "[bold red]evil[/]" in out and "\x1b" not in out and "\\x1b[2J" in out
    assert main(["diff", "gpu01@good", "gpu01@latest", "--markdown"]) == 2
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\\[bold red\\]" in out


def test_bad_inputs_exit_1_naming_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    store = SnapshotStore(tmp_path / "snapshots")
    good = store.save(built_snapshot("gpu01", labels=["good"]))
    truncated = tmp_path / "truncated.json"
    truncated.write_bytes(good.read_bytes()[:100])
    assert main(["diff", "gpu01@good", str(truncated)]) == 1
    err = capsys.readouterr().err
    assert str(truncated) in err and "Traceback" not in err
    assert main(["diff", "gpu01@good", "gpu01@bad"]) == 1
    assert "labels: good" in capsys.readouterr().err
    assert main(["diff", "gpu01@good", "gpu01@latest", "--json", "--markdown"]) == 1


def test_two_hosts_compare_with_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    store = SnapshotStore(tmp_path / "snapshots")
    store.save(built_snapshot("gpu01"))
    store.save(built_snapshot("gpu02"))
    code = main(["diff", "gpu01@latest", "gpu02@latest", "--json"])
    captured = capsys.readouterr()
    assert code == 2 and captured.err.startswith("driftwatch: warning: comparing two different hosts (gpu01 and gpu02)")
    assert json.loads(captured.out)["summary"]["different_hosts"] is True


def test_a_newline_in_host_text_cannot_forge_a_report_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    store = SnapshotStore(tmp_path / "snapshots")
    forged = "/srv/app/new\n CRITICAL (9) \n  gpu        all GPUs fell off the bus.py"
    entry = {"size": 1, "mtime": 1.77e9, "mode": "0644", "sha256": "ab" * 32, "error": None}
    files = {"patterns": ["/srv/app/**"], "files": {forged: entry}, "truncated": False}
    store.save(built_snapshot("gpu01", labels=["good"], files={**files, "files": {}}))
    store.save(built_snapshot("gpu01", minutes=1, files=files))
    assert main(["diff", "gpu01@good", "gpu01@latest"]) == 2
    lines = capsys.readouterr().out.splitlines()
    assert not any(line.startswith((" CRITICAL", "  gpu ")) for line in lines)
    assert any("new\\n CRITICAL (9) \\n  gpu" in line for line in lines)
    assert main(["diff", "gpu01@good", "gpu01@latest", "--markdown"]) == 2
    assert not any(line.startswith(" CRITICAL") for line in capsys.readouterr().out.splitlines())


def test_error_lines_show_escapes_not_run_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    hostile = "gpu\x1b]0;pwned\x07\nforged: error"
    assert main(["diff", f"{hostile}.json", "x.json"]) == 1
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err and "gpu\\x1b]0;pwned\\x07\\nforged" in err
    assert len(err.splitlines()) == 1
    assert main(["no-such-command\x1b[2J"]) == 1
    err = capsys.readouterr().err
    assert "\x1b" not in err and "no-such-command\\x1b[2J" in err
