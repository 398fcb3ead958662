"""Living with known drift over the real sshd: `accept`, `[[ignore]]` rules, and `check` alerting
on them exactly when it should. The host's nvidia-smi replays real captures of one RTX 2080
SUPER on driver 595.71.05 and on 610.57.04; a local HTTP hook catches the alerts."""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from driftwatch.cli import main
from driftwatch.store import SnapshotStore
from tests.hooks import Hook
from tests.sshd import Sshd
from tests.venvs import make_gpu_venv, site_packages, write_dist_info

CAPTURES = Path(__file__).parent / "fixtures" / "nvidia-smi"
DRIVER_595 = CAPTURES / "linux-x86_64__nvidia-geforce-rtx-2080-super__595.71.05.txt"
DRIVER_610 = CAPTURES / "linux-x86_64__nvidia-geforce-rtx-2080-super__610.57.04.txt"


class Host:
    """testhost over SSH, a real venv, and the config and store in the test's folder."""

    def __init__(self, sshd: Sshd, root: Path) -> None:
        self.sshd, self.root = sshd, root
        self.python = make_gpu_venv(root / "venv")
        self.config = root / "driftwatch.toml"
        self.write_config()

    def write_config(self, extra: str = "") -> None:
        self.config.write_text(
            f'timeout = 30\nconnect_timeout = 3\nssh_config = "{self.sshd.ssh_config_path}"\n'
            f'known_hosts = "{self.sshd.known_hosts_path}"\n'
            f'[watch]\npython = ["{self.python}"]\nprocesses = []\n{extra}'
        )

    def driver(self, capture: Path) -> None:
        self.sshd.fake_env(FAKE_NVIDIA_SMI_CAPTURE=str(capture))

    def driver_version(self, version: str) -> None:
        """The 610 capture, as a later driver release would answer (only its version differs)."""
        later = self.root / f"rtx-2080-super__{version}.txt"
        later.write_text(DRIVER_610.read_text().replace("610.57.04", version))
        self.driver(later)

    def sgl_kernel(self, version: str) -> None:
        site = site_packages(self.root / "venv")
        for old in site.glob("sgl_kernel-*.dist-info"):
            for path in sorted(old.rglob("*"), reverse=True):
                path.unlink()
            old.rmdir()
        write_dist_info(site, "sgl_kernel", "sgl-kernel", version, [], {"sgl_kernel/__init__.py": f"# {version}\n"})


@pytest.fixture
def host(sshd: Sshd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Host:
    """testhost's baseline, labelled good, on driver 595.71.05."""
    monkeypatch.chdir(tmp_path)
    h = Host(sshd, tmp_path)
    h.driver(DRIVER_595)
    assert main(["snapshot", "testhost", "--label", "good"]) == 0
    return h


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def check_json(capsys: pytest.CaptureFixture[str], hook: Hook, *extra: str) -> tuple[int, dict]:
    code, out, _ = run(capsys, "check", "testhost", "--notify", hook.url, "--json", *extra)
    [entry] = json.loads(out)
    return code, entry


def by_status(entry: dict, status: str) -> list[str]:
    return [c["category"] for c in entry["changes"] if c["status"] == status]


def test_an_accepted_driver_upgrade_is_quiet_until_it_changes_again(
    host: Host, hook: Hook, capsys: pytest.CaptureFixture[str]
) -> None:
    host.driver(DRIVER_610)  # the planned upgrade happens
    assert main(["snapshot", "testhost"]) == 0
    code, out, err = run(capsys, "accept", "testhost", "--reason", "driver 610 rollout")
    assert code == 0, err
    assert "accepted 2 changes against its 'good' baseline (driver 610 rollout)" in out
    assert "NVIDIA driver 595.71.05 → 610.57.04" in out

    code, entry = check_json(capsys, hook, "--textfile", str(host.root / "prom"))
    assert code == 0 and hook.posts == [], "an accepted change alerted"
    gauges = {
        (s.name, s.labels.get("severity") or s.labels.get("decision")): s.value
        for family in text_string_to_metric_families((host.root / "prom" / "driftwatch_testhost.prom").read_text())
        for s in family.samples
        if s.name in ("driftwatch_drift_changes", "driftwatch_decided_changes")
    }
    assert gauges[("driftwatch_decided_changes", "accepted")] == 2
    assert {v for (name, _), v in gauges.items() if name == "driftwatch_drift_changes"} == {0}
    assert entry["summary"]["total"] == 0 and entry["summary"]["accepted"] == 2
    driver = next(c for c in entry["changes"] if c["category"] == "driver")
    assert driver["status"] == "accepted" and driver["waiver"]["reason"] == "driver 610 rollout"
    assert driver["waiver"]["by"].count("@") == 1  # user@machine

    code, out, _ = run(capsys, "check", "testhost")  # what a person reads
    assert code == 0 and out.startswith("no drift (2 accepted)")
    assert "ACCEPTED" in out and "accepted by " in out and "driver 610 rollout" in out

    code, out, _ = run(capsys, "diff", "testhost@good", "testhost@latest")  # OLD names the baseline
    assert code == 0 and out.startswith("no drift (2 accepted)")
    baseline_file = str(SnapshotStore(host.root / "snapshots").paths("testhost")[0])
    code, out, err = run(capsys, "diff", baseline_file, "testhost@latest")  # no label: nothing accepted
    assert code == 2 and "ACCEPTED" not in out, err

    host.driver_version("610.99.01")  # the host drifts further on the accepted item
    code, entry = check_json(capsys, hook)
    assert code == 2 and len(hook.posts) == 1
    [alert] = hook.posts
    assert alert["status"] == "drift" and "changed again since accepted" in alert["text"]
    assert by_status(entry, "drift") == ["driver"] and by_status(entry, "accepted") == ["gpu"]
    [driver] = [c for c in entry["changes"] if c["category"] == "driver"]
    assert driver["new"] == "610.99.01"
    assert driver["lapsed"].startswith("changed again since accepted (accepted 595.71.05 → 610.57.04 by ")

    assert check_json(capsys, hook)[0] == 2 and len(hook.posts) == 1, "the same drift alerted twice"


def test_replacing_an_acceptance_says_so_and_list_marks_those_not_in_effect(
    host: Host, capsys: pytest.CaptureFixture[str]
) -> None:
    host.driver(DRIVER_610)
    assert main(["snapshot", "testhost"]) == 0
    assert run(capsys, "accept", "testhost", "driver", "--reason", "rollout", "--until", "7d")[0] == 0
    code, _, err = run(capsys, "accept", "testhost", "--reason", "all of it")  # a blanket accept later
    assert code == 0 and "driver:driver: replaces the acceptance accepted 595.71.05 → 610.57.04" in err
    assert "(until " in err and "with this one (never expiring)" in err
    code, out, _ = run(capsys, "accept", "--list")
    assert code == 0 and "not in effect" not in out
    host.driver_version("610.99.01")  # moves on: the acceptance matches nothing any more
    assert main(["snapshot", "testhost"]) == 0
    code, out, _ = run(capsys, "accept", "--list", "--json")
    [driver] = [a for a in json.loads(out) if a["category"] == "driver"]
    assert not driver["in_effect"] and "changed it again, to '610.99.01'" in driver["not_in_effect"]
    code, out, _ = run(capsys, "accept", "--list")
    assert "(not in effect: the latest snapshot changed it again, to '610.99.01')" in out


def test_an_acceptance_applies_from_when_it_was_made(host: Host, capsys: pytest.CaptureFixture[str]) -> None:
    host.driver(DRIVER_610)
    assert main(["snapshot", "testhost", "--label", "then"]) == 0  # drifted, before anyone accepted
    host.sgl_kernel("0.3.17")
    assert main(["snapshot", "testhost"]) == 0
    assert run(capsys, "accept", "testhost", "--reason", "rollout")[0] == 0
    code, out, _ = run(capsys, "diff", "testhost@good", "testhost@latest")
    assert code == 0 and "accepted" in out.splitlines()[0]
    code, out, _ = run(capsys, "diff", "testhost@good", "testhost@then")  # an old pair reads as it did
    assert code == 2 and "ACCEPTED" not in out


def test_an_expired_acceptance_alerts_and_says_so(host: Host, hook: Hook, capsys: pytest.CaptureFixture[str]) -> None:
    host.driver(DRIVER_610)
    assert main(["snapshot", "testhost"]) == 0
    until = datetime.now(timezone.utc) + timedelta(seconds=15)  # room for an accept and a check on a loaded machine
    stamp = until.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert main(["accept", "testhost", "driver", "gpu:*", "--reason", "short trial", "--until", stamp]) == 0
    assert check_json(capsys, hook)[0] == 0 and hook.posts == []

    time.sleep(max(0.0, (until - datetime.now(timezone.utc)).total_seconds()) + 0.5)
    code, entry = check_json(capsys, hook)
    assert code == 2 and len(hook.posts) == 1
    assert "acceptance expired" in hook.posts[0]["text"]
    assert all(c["lapsed"].startswith("acceptance expired") for c in entry["changes"] if c["status"] == "drift")
    code, out, _ = run(capsys, "accept", "--list", "testhost")
    assert code == 0 and "(not in effect: expired, counts as drift again)" in out

    code, _, err = run(capsys, "accept", "testhost", "--reason", "x", "--until", "2020-01-01")
    assert code == 1 and "has already passed" in err  # never accepted already expired


def test_accepting_after_an_alert_resolves_it_once(host: Host, hook: Hook, capsys: pytest.CaptureFixture[str]) -> None:
    host.driver(DRIVER_610)
    assert check_json(capsys, hook)[0] == 2 and [p["status"] for p in hook.posts] == ["drift"]
    assert main(["accept", "testhost", "--reason", "rollout"]) == 0
    assert check_json(capsys, hook)[0] == 0
    assert [p["status"] for p in hook.posts] == ["drift", "resolved"]
    assert "(resolved; 2 accepted)" in hook.posts[1]["text"]
    assert check_json(capsys, hook)[0] == 0 and len(hook.posts) == 2


def test_accept_names_items_warns_about_the_rest_and_revokes(
    host: Host, hook: Hook, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "accept", "testhost", "--reason", "nothing yet")
    assert code == 0 and "nothing to accept" in err and "no drift from its 'good' baseline" in err

    host.driver(DRIVER_610)
    host.sgl_kernel("0.3.17")
    assert main(["snapshot", "testhost"]) == 0
    code, out, err = run(capsys, "accept", "testhost", "driver", "no-such-item", "--reason", "rollout")
    assert code == 0 and "accepted 1 change" in out
    assert "'no-such-item' names no drifting change (drifting: " in err and "package:sgl-kernel" in err
    code, entry = check_json(capsys, hook)
    assert code == 2 and set(by_status(entry, "drift")) == {"gpu", "package"}
    assert by_status(entry, "accepted") == ["driver"]

    code, out, _ = run(capsys, "accept", "--list", "--json")
    [listed] = json.loads(out)
    assert (listed["host"], listed["baseline"], listed["item"], listed["new"]) == ("testhost", "good", "driver", "610.57.04")

    code, out, err = run(capsys, "accept", "--revoke", "testhost", "driver", "sgl-kernel")
    assert code == 0 and "revoked 1 change" in out and "'sgl-kernel' names no acceptance" in err
    assert by_status(check_json(capsys, hook)[1], "accepted") == []
    code, out, _ = run(capsys, "accept", "--list")
    assert "no acceptances" in out


def test_accept_mistakes_are_one_line(host: Host, capsys: pytest.CaptureFixture[str]) -> None:
    for argv, message in (
        (["accept", "testhost"], "say why with --reason"),
        (["accept", "testhost", "--reason", "x", "--until", "someday"], "'someday' is not a time"),
        (["accept", "nosuchhost", "--reason", "x"], "no snapshots of 'nosuchhost'"),
        (["accept", "testhost", "--reason", "x", "--baseline", "other"], "no readable snapshot labelled 'other'"),
        (["accept", "--list", "--revoke"], "exclusive"),
    ):
        code, _, err = run(capsys, *argv)
        assert code == 1 and message in err and "Traceback" not in err, argv


def test_a_damaged_acceptances_file_warns_and_the_drift_alerts(
    host: Host, hook: Hook, capsys: pytest.CaptureFixture[str]
) -> None:
    host.driver(DRIVER_610)
    assert main(["snapshot", "testhost"]) == 0
    assert main(["accept", "testhost", "--reason", "rollout"]) == 0
    state = host.root / "snapshots" / "testhost" / ".accepted.json"
    state.write_text(state.read_text()[:50])  # cut off, as a full disk leaves it
    code, out, err = run(capsys, "check", "testhost", "--notify", hook.url)
    assert code == 2 and len(hook.posts) == 1, "a damaged acceptances file silenced a drift"
    assert ".accepted.json is damaged" in err
    code, _, err = run(capsys, "accept", "testhost", "--reason", "again")
    assert code == 1 and "fix or delete it" in err


def test_an_ignore_rule_hides_what_it_names_and_nothing_else(
    host: Host, hook: Hook, capsys: pytest.CaptureFixture[str]
) -> None:
    host.write_config(
        '[[ignore]]\nitem = "sgl-kernel"\nreason = "kernels rebuilt nightly on this box"\n'
        '[[ignore]]\ncategory = "gpu-process"\nreason = "notebooks"\n'
    )
    host.sgl_kernel("0.3.17")
    host.driver(DRIVER_610)
    code, entry = check_json(capsys, hook)
    assert code == 2 and len(hook.posts) == 1
    assert set(by_status(entry, "drift")) == {"driver", "gpu"} and by_status(entry, "ignored") == ["package"]
    assert entry["summary"]["ignored"] == 1
    assert all(c["item"] != "sgl-kernel" for c in hook.posts[0]["changes"] if c["drift"])

    code, out, err = run(capsys, "check", "testhost")
    assert code == 2 and "1 ignored: package sgl-kernel (--all shows them)" in out
    assert "0.3.17" not in out  # hidden: counted, not listed
    assert err.count("[[ignore]] #2 (gpu-process *)") == 1 and "matched nothing in this run" in err
    assert "[[ignore]] #1" not in err
    code, out, _ = run(capsys, "check", "testhost", "--all")
    assert "IGNORED by the config (1)" in out
    assert "ignored by [[ignore]] #1 (* sgl-kernel): kernels rebuilt nightly on this box" in out
    code, out, err = run(capsys, "check", "testhost", "--quiet")
    assert "matched nothing" not in err  # cron mails only alerts

    code, out, _ = run(capsys, "diff", "testhost@good", "testhost@latest")  # diff applies them too
    assert code == 2 and "1 ignored: package sgl-kernel" in out


def test_accepting_an_upgrade_accepts_the_known_bad_state_it_made(
    host: Host, hook: Hook, capsys: pytest.CaptureFixture[str]
) -> None:
    # sglang pins sgl-kernel==0.3.16.post4; the upgrade breaks the pin (a known-bad state).
    host.sgl_kernel("0.3.17")
    code, entry = check_json(capsys, hook)
    assert code == 2 and [k["rule"] for k in entry["known_bad"]] == ["unmet-requirement"]
    hook.posts.clear()
    code, out, err = run(capsys, "accept", "testhost", "sgl-kernel", "--reason", "kernel rollout")
    assert code == 0, err
    code, out, err = run(capsys, "check", "testhost", "--quiet", "--notify", hook.url)
    assert code == 0, out + err
    assert [post["status"] for post in hook.posts] == ["resolved"], "an accepted change still alerted as drift"
    code, entry = check_json(capsys, hook)
    assert code == 0 and entry["known_bad"] == [] and [k["rule"] for k in entry["known_bad_settled"]] == ["unmet-requirement"]
    code, out, _ = run(capsys, "diff", "testhost@good", "testhost@latest")
    assert code == 0 and out.startswith("no drift (1 accepted)")  # diff and check agree
