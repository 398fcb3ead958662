"""`driftwatch fleet` end to end: one sshd reached as several config hosts, one venv each."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from driftwatch.cli import main
from driftwatch.model import utcnow
from driftwatch.store import SnapshotStore
from tests.diff.builders import baseline, dists, make_snapshot
from tests.sshd import Sshd, free_port
from tests.venvs import make_gpu_venv, site_packages, write_dist_info

Run = tuple[int, str, str]
HOSTS = ("gpu01", "gpu02", "gpu03", "gpu04")


@pytest.fixture(scope="module")
def venvs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Four look-alike venvs; gpu03's has NCCL 2.21.5 instead of 2.27.3."""
    root = tmp_path_factory.mktemp("fleet-venvs")
    with pytest.MonkeyPatch.context() as mp:
        # The editable sglang's checkout is a fresh git repo per venv: the same date makes
        # the same commit, as the same release checked out on every host would.
        for var in ("GIT_AUTHOR_DATE", "GIT_COMMITTER_DATE"):
            mp.setenv(var, "2026-02-19T10:00:00+00:00")
        pythons = {host: make_gpu_venv(root / host) for host in HOSTS}
    site = site_packages(root / "gpu03")
    shutil.rmtree(site / "nvidia_nccl_cu12-2.27.3.dist-info")
    files = {"nvidia/nccl/__init__.py": "", "nvidia/nccl/lib/libnccl.so.2": "\x7fELF-older\n"}
    write_dist_info(site, "nvidia_nccl_cu12", "nvidia-nccl-cu12", "2.21.5", [], files)
    return pythons


@pytest.fixture
def config(sshd: Sshd, venvs: dict[str, Path], tmp_path: Path) -> Iterator[Path]:
    sshd.fake_env()
    hosts = "".join(f'[hosts.{h}]\naddress = "testhost"\npython = ["{p}"]\n\n' for h, p in venvs.items())
    path = tmp_path / "driftwatch.toml"
    path.write_text(
        f'store = "{tmp_path / "snapshots"}"\nconnect_timeout = 3\n'
        f'ssh_config = "{sshd.ssh_config_path}"\nknown_hosts = "{sshd.known_hosts_path}"\n\n'
        # No server patterns: the hosts share one machine, and a server is on none of them.
        '[watch]\nprocesses = []\n\n'
        f'{hosts}[hosts.gone]\naddress = "root@127.0.0.1:{free_port()}"\n\n'
        '[groups]\nrack = ["gpu01", "gpu02", "gpu03"]\ngood = ["gpu01", "gpu02", "gpu04"]\n'
        'broken = ["gpu01", "gpu02", "gone"]\n'
    )
    yield path


def fleet(capsys: pytest.CaptureFixture[str], config: Path, *argv: str) -> Run:
    code = main(["fleet", *argv, "--config", str(config)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_rack_names_the_odd_host_and_the_fact_first(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = fleet(capsys, config, "rack", "--snapshot")
    first = out.splitlines()[0]
    assert code == 2, err
    assert first == "1 odd host out of 3: gpu03 — nvidia-nccl-cu12 2.21.5 where the other 2 hosts have 2.27.3"
    assert "gpu01" not in first and "gpu02" not in first
    # The fresh snapshots were stored, and the stored ones say the same.
    code, out, _ = fleet(capsys, config, "rack", "--json")
    document = json.loads(out)
    assert code == 2 and set(document) == {"findings", "ignored", "summary", "known_bad"}
    assert document["summary"]["headline"] == first and document["summary"]["outlier_hosts"] == ["gpu03"]
    assert [f["outliers"] for f in document["findings"]] == [[{"host": "gpu03", "value": "2.21.5"}]]
    assert document["findings"][0]["item"] == "nvidia-nccl-cu12"
    code, out, _ = fleet(capsys, config, "rack")
    assert code == 2 and out.splitlines()[0] == first


def test_fresh_json_agrees_with_the_terminal(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = fleet(capsys, config, "gpu01", "gpu02", "gpu03", "--snapshot", "--json", "--parallel", "2")
    document = json.loads(out)
    assert code == 2 and document["summary"]["hosts"] == ["gpu01", "gpu02", "gpu03"]
    [finding] = document["findings"]
    assert finding["majority"] == {"value": "2.27.3", "count": 2} and finding["severity"] == "high"


def test_identical_hosts_agree(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = fleet(capsys, config, "good", "--snapshot")
    assert code == 0, out + err
    assert out.splitlines()[0] == "all 3 hosts agree"


def test_an_unreachable_host_is_reported_and_the_rest_compared(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = fleet(capsys, config, "broken", "--snapshot", "--json")
    document = json.loads(out)
    assert code == 1, err  # the worst outcome: a host could not be compared
    assert "gone" in err and "127.0.0.1" in err and "Traceback" not in err
    assert document["summary"]["hosts"] == ["gpu01", "gpu02"]
    assert [u["host"] for u in document["summary"]["unreachable"]] == ["gone"]
    assert (config.parent / "snapshots" / "gpu01").is_dir()


def test_one_reachable_host_is_not_a_fleet(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = fleet(capsys, config, "gpu01", "gone", "--snapshot")
    assert code == 1 and out == ""
    assert "gone" in err and "only 1 of 2 hosts" in err


# -- stored snapshots, no SSH --------------------------------------------------------


def three_hosts(root: Path, odd_package: str) -> Path:
    """A store holding gpu01..gpu03 (gpu03 with one more package, named by a hostile host) and a config."""
    store = SnapshotStore(root / "snapshots")
    for n in (1, 2, 3):
        facts = baseline()
        facts["system"].update(hostname=f"node{n}", boot_id=f"b{n}")
        if n == 3:
            dists(facts)[odd_package] = {"name": "evil", "version": "1.0"}
        # Taken a minute ago: fresh, well inside fleet's default --max-age of 1h.
        store.save(make_snapshot(host=f"gpu0{n}", **facts).model_copy(update={"taken_at": utcnow() - timedelta(minutes=1)}))
    config = root / "driftwatch.toml"
    config.write_text(f'store = "{store.root}"\n[groups]\nrack = ["gpu01", "gpu02", "gpu03"]\n'
                      '[hosts.gpu01]\n[hosts.gpu02]\n[hosts.gpu03]\n[hosts.gpu09]\n')
    return config


@pytest.fixture
def stored(tmp_path: Path) -> Path:
    return three_hosts(tmp_path, "evil\x1b]0;pwned\x07[bold]x[/bold]")


def test_stored_markdown_and_terminal_start_with_the_headline_and_escape_host_text(
    stored: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = fleet(capsys, stored, "rack", "--markdown")
    assert code == 2 and out.startswith("**driftwatch fleet:** 1 odd host out of 3: gpu03")
    assert "\x1b" not in out and "\x07" not in out
    code, out, _ = fleet(capsys, stored, "rack")
    assert code == 2 and out.startswith("1 odd host out of 3: gpu03")
    assert "\x1b" not in out and "\\x1b" in out and "[bold]x[/bold]" in out


def test_a_newline_in_host_text_stays_inside_its_finding(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = three_hosts(tmp_path, "evil\n CRITICAL (1) \n  gpu forged")
    code, out, _ = fleet(capsys, config, "rack")
    assert code == 2 and "evil\\n CRITICAL (1) \\n  gpu forged" in out
    assert not any(line.startswith((" CRITICAL", "  gpu forged")) for line in out.splitlines())


def test_a_host_without_snapshots_is_an_error_naming_it(stored: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = fleet(capsys, stored, "gpu01", "gpu09")
    assert code == 1 and out == "" and "gpu09" in err and "--snapshot" in err


def test_an_unreadable_snapshot_is_skipped_with_a_warning_naming_it(stored: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = stored.parent / "snapshots" / "gpu02"
    broken = folder / "99990101T000000.000000Z.json"
    broken.write_text("{not json")
    code, out, err = fleet(capsys, stored, "rack")
    assert code == 2 and out.startswith("1 odd host out of 3: gpu03"), "gpu02's older snapshot is compared"
    assert err.count(str(broken)) == 1 and "warning" in err and "Traceback" not in err
    for name in os.listdir(folder):
        if name != broken.name:
            (folder / name).write_text("")
    code, out, err = fleet(capsys, stored, "rack", "--json")
    assert code == 1 and json.loads(out)["summary"]["hosts"] == ["gpu01", "gpu03"]
    assert "gpu02: no readable snapshot (left out of the comparison)" in err


def test_fewer_than_two_hosts_and_clashing_forms_are_errors(stored: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert fleet(capsys, stored, "gpu01")[0] == 1
    code, _, err = fleet(capsys, stored, "rack", "--json", "--markdown")
    assert code == 1 and "exclusive" in err


def test_an_ignore_rule_for_the_odd_host_makes_the_fleet_agree(stored: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rule = '[[ignore]]\ncategory = "package"\nitem = "evil*"\nhosts = ["gpu03"]\nreason = "a test wheel"\n'
    stored.write_text(stored.read_text() + rule)
    code, out, err = fleet(capsys, stored, "rack")
    assert code == 0 and out.startswith("all 3 hosts agree"), out + err
    assert "1 ignored: package evil" in out and "(--all shows them)" in out
    code, out, _ = fleet(capsys, stored, "rack", "--all")
    assert code == 0 and "ignored by [[ignore]] #1 (package evil*): a test wheel" in out
    stored.write_text(stored.read_text().replace('hosts = ["gpu03"]', 'hosts = ["gpu01"]'))
    code, out, err = fleet(capsys, stored, "rack", "--json")
    assert code == 2 and json.loads(out)["ignored"] == []  # gpu03 is the one that differs
    assert "[[ignore]] #1 (package evil*)" in err and "matched nothing in this run" in err


def test_html_matrix_of_hosts_snapshotted_now(config: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from tests.report.html.dom import parse

    report = tmp_path / "rack.html"
    code, out, err = fleet(capsys, config, "rack", "--snapshot", "--html", str(report))
    assert code == 2, err
    assert out.splitlines()[0].startswith("1 odd host out of 3: gpu03")
    matrix = parse(report.read_text(encoding="utf-8")).find("table", "matrix")
    marked = {(td.attrs["data-host"], td.attrs["data-fact"]) for td in matrix.find_all("td", "outlier")}
    assert marked == {("gpu03", "nccl")}
    cells = {(td.attrs["data-host"], td.attrs["data-fact"]): td for td in matrix.find_all("td")}
    assert [cells[h, "nccl"].text for h in ("gpu01", "gpu02", "gpu03")] == ["2.27.3", "2.27.3", "2.21.5"]
    assert "majority 2.27.3 (2 of 3 hosts)" in cells["gpu03", "nccl"].attrs["title"]
    # The real probes' headline facts, the same on every host: driver, GPUs, torch from the venv.
    for fact in ("driver", "gpu-count", "torch", "sglang"):
        assert len({cells[h, fact].text for h in ("gpu01", "gpu02", "gpu03")}) == 1, fact
        assert cells["gpu01", fact].text not in ("", "—"), fact


def test_a_known_bad_state_every_host_holds_is_said_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = three_hosts(tmp_path, "evil")
    store = SnapshotStore(tmp_path / "snapshots")
    for n in (1, 2, 3):  # every host now has an sgl-kernel off sglang's pin
        facts = baseline()
        facts["system"].update(hostname=f"node{n}", boot_id=f"b{n}")
        dists(facts)["sgl-kernel"]["version"] = "0.3.17"
        store.save(make_snapshot(host=f"gpu0{n}", **facts).model_copy(update={"taken_at": utcnow()}))
    code, out, _ = fleet(capsys, config, "rack")
    assert code == 0 and out.count("unmet-requirement") == 1, out
    assert " KNOWN-BAD (1) " in out and "unmet-requirement on every host (3): sglang 0.5.6 requires sgl-kernel" in out
    code, out, _ = fleet(capsys, config, "rack", "--markdown")
    assert out.count("sglang 0.5.6 requires sgl-kernel") == 1 and "| every host (3) | high |" in out
