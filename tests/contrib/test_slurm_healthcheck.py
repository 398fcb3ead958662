"""The Slurm recipe against a real one-node Slurm (tests/slurm.py): slurmd runs
contrib/slurm/driftwatch-healthcheck.sh as its HealthCheckProgram every few seconds, on a
`local` host whose venv drifts; the node is drained with driftwatch's line as the reason,
and resumed when a later check is clean, but never when someone else drained it."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from driftwatch.cli import main
from tests.localhost import H200, local_host
from tests.slurm import Slurm, SlurmUnavailable, start_slurm
from tests.test_cli_check import set_sgl_kernel

SCRIPT = Path(__file__).parents[2] / "contrib" / "slurm" / "driftwatch-healthcheck.sh"
INTERVAL = 5  # HealthCheckInterval, seconds
WAIT = 120.0  # for a state the next checks should reach, on a loaded 2-core machine


@dataclass
class Node:
    slurm: Slurm
    venv: Path
    runs: Path  # one line per finished health check: its exit status

    def finished(self) -> int:
        return len(self.runs.read_text().splitlines()) if self.runs.exists() else 0

    def wait_checks(self, count: int) -> None:
        """Until ``count`` more health checks have finished."""
        target = self.finished() + count
        wait_until(lambda: self.finished() >= target, f"{count} more health checks", self.slurm)

    def wait_state(self, wanted: Callable[[str, str], bool], what: str) -> tuple[str, str]:
        wait_until(lambda: wanted(*self.slurm.node_state()), what, self.slurm)
        return self.slurm.node_state()


def wait_until(condition: Callable[[], bool], what: str, slurm: Slurm) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"never reached: {what}; node is {slurm.node_state()}\n{slurm.logs()}")
        time.sleep(0.5)


@contextmanager
def slurm_node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, slurm_conf: str) -> Iterator[Node]:
    """A `local` host with a good baseline, and Slurm running the recipe as the lines
    ``slurm_conf`` say (``{program}`` is the recipe's path)."""
    root = tmp_path / "host"
    root.mkdir()
    # A real venv, a watched file, a fake nvidia-smi replaying an H200; no server patterns:
    # stand-in servers other tests start on this machine are not this node's.
    local_host(root, monkeypatch, watch="processes = []\n")
    assert main(["snapshot", "local", "--label", "good"]) == 0
    # slurmd gives its health check no environment: the recipe's settings file says it all.
    driftwatch = root / "driftwatch"
    driftwatch.write_text(f'#!/bin/sh\nexec {sys.executable} -m driftwatch "$@"\n')
    driftwatch.chmod(0o755)
    settings = root / "healthcheck.conf"
    settings.write_text(
        f"DRIFTWATCH={driftwatch}\n"
        f'DRIFTWATCH_ARGS="--config {root}/driftwatch.toml --store {root}/snapshots --textfile {root}/textfile"\n'
        "FAIL_ON=high\nDEADLINE=30\n"
        f"export PATH={root}/bin:$PATH FAKE_NVIDIA_SMI_CAPTURE={H200}\n"
        f"export SLURM_CONF={tmp_path}/slurm/slurm.conf\n"  # a cluster's own is /etc/slurm/slurm.conf
        f"export HOME={os.environ['HOME']}\n"  # the test's own: slurmd's would be root's (its profile, its caches)
    )
    runs = root / "runs"
    logs = tmp_path / "slurm" / "log"  # the failure message shows the recipe's log with slurm's
    logs.mkdir(parents=True)
    program = root / "healthcheck"  # what slurm.conf names: the shipped script, with its settings
    program.write_text(
        f"#!/bin/sh\nDRIFTWATCH_HEALTHCHECK_CONF={settings} {SCRIPT} 2>> {logs}/healthcheck.log\n"
        f"rc=$?\necho $rc >> {runs}\nexit $rc\n"
    )
    program.chmod(0o755)
    try:
        slurm = start_slurm(tmp_path / "slurm", slurm_conf_extra=slurm_conf.format(program=program))
    except SlurmUnavailable as exc:
        pytest.skip(f"SLURM DID NOT START, the Slurm recipe is untested here: {exc}")
    try:
        yield Node(slurm=slurm, venv=root / "venv", runs=runs)
    finally:
        slurm.stop()


@pytest.fixture
def node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Node]:
    """The recipe as slurmd's HealthCheckProgram."""
    conf = f"HealthCheckProgram={{program}}\nHealthCheckInterval={INTERVAL}\nHealthCheckNodeState=ANY"
    with slurm_node(tmp_path, monkeypatch, conf) as made:
        yield made


@pytest.fixture
def prolog_node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Node]:
    """The recipe as slurmd's Prolog, run before each job on the node; a job it refuses is
    requeued (not held) to run elsewhere."""
    with slurm_node(tmp_path, monkeypatch, "Prolog={program}\nSchedulerParameters=nohold_on_prolog_fail") as made:
        yield made


def drained(state: str, reason: str) -> bool:
    return state in ("drained", "draining")


def test_a_drifting_node_is_drained_with_the_reason_and_resumed_when_clean(node: Node) -> None:
    node.wait_checks(1)
    assert node.slurm.node_state() == ("idle", "none")

    set_sgl_kernel(node.venv, "0.3.17")
    state, reason = node.wait_state(drained, "drained after the drift")
    assert reason.startswith("ERROR: driftwatch: sgl-kernel 0.3.16.post4 → 0.3.17 (patch upgrade"), reason
    assert len(reason) <= 200 and "\n" not in reason

    set_sgl_kernel(node.venv, "baseline")
    node.wait_state(lambda state, reason: (state, reason) == ("idle", "none"), "resumed once clean")


def test_a_node_someone_else_drained_is_never_resumed_or_relabelled(node: Node) -> None:
    node.slurm.run("scontrol", "update", f"nodename={node.slurm.node}", "state=drain", "reason=replacing a DIMM")
    node.wait_checks(2)  # clean checks
    assert node.slurm.node_state() == ("drained", "replacing a DIMM")

    set_sgl_kernel(node.venv, "0.3.17")
    node.wait_checks(2)  # failing checks
    assert node.slurm.node_state() == ("drained", "replacing a DIMM")


def test_in_the_prolog_a_drifting_node_refuses_the_job_and_is_drained(prolog_node: Node, tmp_path: Path) -> None:
    slurm = prolog_node.slurm

    def submit(marker: Path) -> str:
        out = slurm.run("sbatch", "--parsable", f"--chdir={tmp_path}", "--output=/dev/null", f"--wrap=touch {marker}")
        return out.strip().split(";")[0]

    submit(tmp_path / "ran-1")
    wait_until(lambda: (tmp_path / "ran-1").exists(), "the job on the clean node ran", slurm)

    set_sgl_kernel(prolog_node.venv, "0.3.17")
    job = submit(tmp_path / "ran-2")
    state, reason = prolog_node.wait_state(drained, "drained by the Prolog")
    assert reason.startswith("ERROR: driftwatch: sgl-kernel 0.3.16.post4 → 0.3.17"), reason
    wait_until(lambda: slurm.run("squeue", "--noheader", f"--jobs={job}", "--format=%T").strip() == "PENDING",
               "the job requeued", slurm)
    assert not (tmp_path / "ran-2").exists(), "the job ran on the drifting node"
