"""``driftwatch_perf_*`` gauges: every measured figure per GPU, never a 0 for a missing one."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from driftwatch.cron.textfile import write_textfile
from tests.diff.builders import make_snapshot
from tests.perf_builders import GPUS, perf_facts


def samples(path: Path) -> dict[str, list[tuple[dict[str, str], float]]]:
    found: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(path.read_text()):
        for sample in family.samples:
            found.setdefault(sample.name, []).append((sample.labels, sample.value))
    return found


def test_figures_per_gpu_throttle_and_sections(tmp_path: Path) -> None:
    facts = perf_facts(scale={5: 0.77}, throttle={5: {"SW_POWER_CAP": 1.0}})
    facts["gpus"][GPUS[2]]["figures"]["gemm_fp8"] = {"status": "error", "reason": "CUDA error"}
    path = write_textfile(tmp_path, "gpu01", snapshot=make_snapshot(perf=facts), result=None, now=1.0)
    found = samples(path)
    figures = {(s["gpu"], s["figure"]): (s["unit"], v) for s, v in found["driftwatch_perf_figure"]}
    assert figures[("5", "gemm_bf16")] == ("TFLOP/s", pytest.approx(614.46))
    assert figures[("0", "h2d")] == ("GB/s", 55.2)
    assert figures[("", "gemm")][0] == "GFLOP/s" and figures[("", "all_reduce")] == ("GB/s", 478.0)
    assert ("2", "gemm_fp8") not in figures  # not measured: no sample, not a 0
    assert len(figures) == 8 * 5 - 1 + 2 + 1
    assert ({"host": "gpu01", "gpu": "5", "reason": "SW_POWER_CAP"}, 1.0) in found["driftwatch_perf_throttle_share"]
    sections = {(s["section"], s["status"]): v for s, v in found["driftwatch_perf_section"]}
    assert sections[("gpu", "ok")] == 1 and sections[("gpu", "refused")] == 0


def test_a_refused_run_has_no_gpu_figures(tmp_path: Path) -> None:
    facts = perf_facts(gpu_status="refused", reason="GPU 3 busy: sglang pid 4411, 71.2 GiB")
    found = samples(write_textfile(tmp_path, "gpu01", snapshot=make_snapshot(perf=facts), result=None, now=1.0))
    assert {s["gpu"] for s, _ in found["driftwatch_perf_figure"]} == {""}
    assert ({"host": "gpu01", "section": "gpu", "status": "refused"}, 1.0) in found["driftwatch_perf_section"]


def test_no_perf_no_gauges(tmp_path: Path) -> None:
    found = samples(write_textfile(tmp_path, "gpu01", snapshot=make_snapshot(), result=None, now=1.0))
    assert not any(name.startswith("driftwatch_perf_") for name in found)


@pytest.mark.skipif(shutil.which("promtool") is None, reason="needs promtool (Debian's prometheus)")
def test_promtool_accepts_the_file(tmp_path: Path) -> None:
    path = write_textfile(tmp_path, "gpu01", snapshot=make_snapshot(perf=perf_facts()), result=None, now=1.0)
    checked = subprocess.run(["promtool", "check", "metrics"], input=path.read_bytes(), capture_output=True)
    assert checked.returncode == 0, checked.stderr.decode() + checked.stdout.decode()
