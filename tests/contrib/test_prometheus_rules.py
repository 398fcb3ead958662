"""contrib/prometheus/driftwatch.rules.yml under `promtool test rules`, on the series a
fleet's node_exporters would serve: each host's textfile is written by driftwatch itself
(write_textfile, real diffs and diagnoses of realistic snapshots), then read back as
node_exporter reads it, plus node_exporter's own node_textfile_mtime_seconds."""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from driftwatch.cron.textfile import write_textfile
from driftwatch.explain import diff_snapshots
from driftwatch.model import ProbeRecord, ProbeStatus, Snapshot
from driftwatch.rules.registry import diagnose
from tests.builders import snapshot

RULES = Path(__file__).parents[2] / "contrib" / "prometheus" / "driftwatch.rules.yml"
MINUTES = 90  # of input series, one sample a minute
ALERTS = (
    "DriftwatchDrift", "DriftwatchKnownBadState", "DriftwatchHostDown", "DriftwatchTextfileStale",
    "DriftwatchFleetOddNCCL", "DriftwatchFleetOddDriver", "DriftwatchFleetOddTorch", "DriftwatchFleetOddSGLang",
)  # fmt: skip
FLEET_HINT = "driftwatch fleet --all (with --store for a shared store) names every fact it differs in."


@pytest.fixture(scope="module")
def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.skip("PROMTOOL NOT INSTALLED (Debian's prometheus package; .ci/run installs it): the rules are untested here")
    return found


def gpu_host(
    name: str, *, nccl: str = "2.27.3", driver: str = "590.48.01", torch: str = "2.8.0+cu128", sglang: str = "0.5.6",
    sgl_kernel: str = "0.3.16.post4",
) -> Snapshot:
    """An 8×H200 inference host as its snapshot would have it."""
    interpreter = "/opt/venv/bin/python"
    dists = {
        "torch": {"version": torch},
        "sglang": {"version": sglang, "requires": ['sgl-kernel==0.3.16.post4; extra == "srt"']},
        "sgl-kernel": {"version": sgl_kernel},
        "nvidia-nccl-cu12": {"version": nccl},
    }
    return snapshot(
        name,
        gpu={
            "driver_version": driver, "cuda_version": "13.1",
            "gpus": {f"GPU-{name}-{i}": {"index": i, "name": "NVIDIA H200"} for i in range(8)},
        },
        python={"interpreters": {interpreter: {"version": "3.12.3", "distributions": dists}}},
        cuda={
            "nccl": {"distributions": {"nvidia-nccl-cu12": nccl}, "system": {}},
            "torch": {interpreter: {"version": torch, "cuda": "12.8"}},
        },
    )


@dataclass
class Fleet:
    """The hosts' textfiles, as node_exporter on each host would serve them."""

    folder: Path
    stale: set[str] = field(default_factory=set)  # textfiles nobody rewrites any more

    def check(self, name: str, now: Snapshot | None, baseline: Snapshot | None = None) -> None:
        """Write ``name``'s textfile as `driftwatch check --textfile` does."""
        result = diff_snapshots(baseline or now, now) if now is not None else None
        known_bad = diagnose(now) if now is not None else None
        write_textfile(self.folder, name, snapshot=now, result=result, known_bad=known_bad, now=0.0)

    def input_series(self) -> list[dict[str, str]]:
        series = []
        for prom in sorted(self.folder.glob("driftwatch_*.prom")):
            host = prom.stem.removeprefix("driftwatch_")
            scrape = {"instance": f"{host}:9100", "job": "node"}
            for family in text_string_to_metric_families(prom.read_text()):
                for sample in family.samples:
                    series.append({"series": selector(sample.name, {**sample.labels, **scrape}),
                                   "values": f"{sample.value:g}+0x{MINUTES}"})
            # node_exporter's own: the file's mtime, moving on with each check unless stale.
            mtime = {"file": f"/var/lib/prometheus/node-exporter/{prom.name}", **scrape}
            step = 0 if host in self.stale else 60
            series.append({"series": selector("node_textfile_mtime_seconds", mtime), "values": f"0+{step}x{MINUTES}"})
        return series


def selector(name: str, labels: dict[str, str]) -> str:
    """A series as promtool reads it; an empty label is dropped, as a scrape drops it."""
    shown = ",".join(f'{k}="{_escaped(v)}"' for k, v in sorted(labels.items()) if v != "")
    return f"{name}{{{shown}}}"


def _escaped(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def info_labels(fleet: Fleet, host: str) -> dict[str, str]:
    """The labels an alert on ``host``'s driftwatch_info series carries (less the rule's)."""
    prom = (fleet.folder / f"driftwatch_{host}.prom").read_text()
    [labels] = [s.labels for f in text_string_to_metric_families(prom) for s in f.samples if s.name == "driftwatch_info"]
    return {k: v for k, v in labels.items() if v} | {"instance": f"{host}:9100", "job": "node"}


def promtool_test(promtool: str, tmp_path: Path, fleet: Fleet, expected: dict[str, list[dict[str, Any]]],
                  at: str = "60m") -> None:
    """Run promtool on the fleet's series: ``expected`` alerts (every other alert: none) at ``at``."""
    tests = [{"eval_time": at, "alertname": name, "exp_alerts": expected.get(name, [])} for name in ALERTS]
    spec = {
        "rule_files": [str(RULES)],
        "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": fleet.input_series(), "alert_rule_test": tests}],
    }
    test_file = tmp_path / "driftwatch.rules.test.yml"
    test_file.write_text(json.dumps(spec, indent=1))  # YAML is a superset of JSON
    done = subprocess.run([promtool, "test", "rules", str(test_file)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"promtool:\n{done.stdout}\n{done.stderr}"


def alert(labels: dict[str, str], summary: str, description: str, severity: str = "warning") -> dict[str, Any]:
    return {"exp_labels": {**labels, "severity": severity},
            "exp_annotations": {"summary": summary, "description": description}}


@pytest.fixture
def fleet(tmp_path: Path) -> Fleet:
    """Five alike hosts checked clean against their baselines; tests change what they need."""
    made = Fleet(tmp_path / "textfile")
    for i in range(1, 6):
        made.check(f"gpu0{i}", gpu_host(f"gpu0{i}"))
    return made


def test_the_rules_file_is_valid(promtool: str) -> None:
    done = subprocess.run([promtool, "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and f"SUCCESS: {len(ALERTS)} rules found" in done.stdout, done.stdout + done.stderr


def test_a_healthy_fleet_fires_nothing(promtool: str, tmp_path: Path, fleet: Fleet) -> None:
    promtool_test(promtool, tmp_path, fleet, {})


@pytest.mark.parametrize(
    ("alertname", "odd", "summary"),
    [
        ("DriftwatchFleetOddNCCL", {"nccl": "2.26.2"}, "gpu04 runs NCCL 2.26.2, unlike most of the fleet"),
        ("DriftwatchFleetOddDriver", {"driver": "580.95.05"}, "gpu04 runs NVIDIA driver 580.95.05, unlike most of the fleet"),
        ("DriftwatchFleetOddTorch", {"torch": "2.9.0+cu128"}, "gpu04 runs torch 2.9.0+cu128, unlike most of the fleet"),
        ("DriftwatchFleetOddSGLang", {"sglang": "0.5.5"}, "gpu04 runs sglang 0.5.5, unlike most of the fleet"),
    ],
)
def test_the_odd_host_out_fires_for_what_differs_and_nothing_else(
    promtool: str, tmp_path: Path, fleet: Fleet, alertname: str, odd: dict[str, str], summary: str
) -> None:
    fleet.check("gpu04", gpu_host("gpu04", **odd))  # its own baseline: no drift, just different
    expected = {alertname: [alert(info_labels(fleet, "gpu04"), summary, FLEET_HINT)]}
    promtool_test(promtool, tmp_path, fleet, expected)
    promtool_test(promtool, tmp_path, fleet, {}, at="20m")  # a rolling upgrade gets 30 minutes


def test_no_majority_names_no_outlier(promtool: str, tmp_path: Path) -> None:
    split = Fleet(tmp_path / "textfile")  # two and two: neither NCCL is the fleet's
    for name, nccl in (("gpu01", "2.27.3"), ("gpu02", "2.27.3"), ("gpu03", "2.26.2"), ("gpu04", "2.26.2")):
        split.check(name, gpu_host(name, nccl=nccl))
    promtool_test(promtool, tmp_path, split, {})


def test_an_unknown_version_is_not_an_outlier(promtool: str, tmp_path: Path, fleet: Fleet) -> None:
    hung = gpu_host("gpu04")
    hung.probes["gpu"] = ProbeRecord(status=ProbeStatus.timeout, error="nvidia-smi hung")
    fleet.check("gpu04", hung)  # its driver is unknown (an empty label), not different
    promtool_test(promtool, tmp_path, fleet, {})


def test_drift_known_bad_state_down_and_stale_each_fire_for_their_host(
    promtool: str, tmp_path: Path, fleet: Fleet
) -> None:
    # gpu02: sgl-kernel upgraded under sglang's pin: one drift change, one known-bad state.
    fleet.check("gpu02", gpu_host("gpu02", sgl_kernel="0.3.17"), baseline=gpu_host("gpu02"))
    fleet.check("gpu03", None)  # not reached
    fleet.stale.add("gpu05")  # its check stopped running an hour ago
    scrape = {"gpu02": {"host": "gpu02", "instance": "gpu02:9100", "job": "node"},
              "gpu03": {"host": "gpu03", "instance": "gpu03:9100", "job": "node"}}
    expected = {
        "DriftwatchDrift": [alert(
            scrape["gpu02"], "gpu02 drifted from its baseline (1 changes)",
            "driftwatch diff gpu02@good gpu02@latest explains them, most likely cause first.",
        )],
        "DriftwatchKnownBadState": [alert(
            scrape["gpu02"], "gpu02 is in 1 known-bad state(s)",
            "driftwatch doctor gpu02@latest names each, with its fix and reference.",
        )],
        "DriftwatchHostDown": [alert(
            scrape["gpu03"], "driftwatch could not snapshot gpu03",
            "The host was not reached or nothing could be collected; the check's output says why.",
        )],
        "DriftwatchTextfileStale": [alert(
            {"file": "/var/lib/prometheus/node-exporter/driftwatch_gpu05.prom", "instance": "gpu05:9100", "job": "node"},
            "/var/lib/prometheus/node-exporter/driftwatch_gpu05.prom on gpu05:9100 was not rewritten for 1h 0m 0s",
            "driftwatch check has not run there for that long: its cron job, timer or Slurm health check stopped, "
            "or it cannot write the folder.",
        )],
    }
    promtool_test(promtool, tmp_path, fleet, expected)
