"""The perf figures as people read them: `show`'s section and the diff page's bar chart."""

from __future__ import annotations

from pathlib import Path

from driftwatch.explain import diff_snapshots
from driftwatch.report.html.diff import render_diff
from driftwatch.report.perf import charts, show_rows
from driftwatch.report.show import sections
from tests.diff.builders import make_snapshot
from tests.perf_builders import GPUS, perf_facts
from tests.report.html.browser import chromium, load
from tests.report.html.dom import parse


def test_show_has_every_gpus_figures_and_what_was_not_measured() -> None:
    facts = perf_facts(throttle={5: {"SW_POWER_CAP": 1.0}})
    facts["gpus"][GPUS[2]]["figures"]["gemm_fp8"] = {"status": "skipped", "reason": "fp8 needs compute capability 8.9"}
    facts["gpus"][GPUS[3]]["figures"]["hbm_copy"] = {"status": "error", "reason": "RuntimeError: CUDA error: out of memory"}
    section = next(s for s in sections(make_snapshot(perf=facts)) if s.title.startswith("Performance"))
    assert section.title == "Performance (perf probe v1)"
    rows = {row[0]: row for row in section.rows}
    assert rows["CPU"] == ["CPU", "numpy 2.4.6, 2 thread(s)", "GEMM 5.4 GFLOP/s", "copy 5.5 GB/s"]
    assert rows["GPU"] == ["GPU", "bf16 GEMM", "fp8 GEMM", "HBM copy", "H2D", "D2H", "throttled during the run"]
    assert rows["GPU 2 (H200, 00000000:38:00.0)"][2] == "skipped"
    assert rows["GPU 3 (H200, 00000000:48:00.0)"][3] == "error: RuntimeError: CUDA error: out of memory"
    assert rows["GPU 5 (H200, 00000000:68:00.0)"][1] == "798 TFLOP/s (re-measured 801)"
    assert rows["GPU 5 (H200, 00000000:68:00.0)"][-1] == "SW_POWER_CAP 100%"
    assert rows["all-reduce over 8 GPUs"] == ["all-reduce over 8 GPUs", "busbw 478 GB/s (re-measured 479)", "NCCL 2.27.3"]
    assert section.notes == ["ran with driver 590.48.01, torch 2.8.0+cu128, cuda 12.8, cublas 12.8.4.1, nccl 2.27.3"]


def test_show_says_why_the_gpus_were_not_measured() -> None:
    rows, notes = show_rows(perf_facts(gpu_status="refused", reason="GPU 3 busy: sglang pid 4411, 71.2 GiB"))
    assert [r[0] for r in rows] == ["CPU"]
    assert notes[0] == "GPU section refused: GPU 3 busy: sglang pid 4411, 71.2 GiB"


def test_charts_bar_per_gpu_old_beside_new() -> None:
    old, new = perf_facts(), perf_facts(scale={5: 0.77})
    drawn = charts(old, new)
    assert [c.title for c in drawn] == ["bf16 GEMM (TFLOP/s)", "fp8 GEMM (TFLOP/s)", "HBM copy (GB/s)",
                                        "host-to-device copy (GB/s)", "device-to-host copy (GB/s)"]
    bars = drawn[0].bars
    assert len(bars) == 8 and [b.slower for b in bars] == [False] * 5 + [True] + [False] * 2
    assert bars[5].text == "614 vs 798 TFLOP/s (−23%)" and bars[5].new_width == 77 and bars[5].old_width == 100


def test_the_diff_page_draws_the_chart_and_runs_no_script(tmp_path: Path) -> None:
    old_facts, new_facts = perf_facts(), perf_facts(scale={5: 0.77})
    new_facts["gpus"][GPUS[1]]["name"] = 'NVIDIA H200 <script>alert(1)</script>'
    result = diff_snapshots(make_snapshot(perf=old_facts), make_snapshot(minutes=60, perf=new_facts))
    page = render_diff(result, charts=charts(old_facts, new_facts))
    assert "<script>" not in page
    root = parse(page)
    slower = root.find_all("tr", "slower")
    assert len(slower) == 5 and slower[0].find("th").text == "GPU 5 (H200, 00000000:68:00.0)"
    loaded = load(chromium(), _write(tmp_path / "diff.html", page))
    assert loaded.title.startswith("driftwatch diff") and loaded.console == []
    assert len(loaded.dom.find_all("div", "bar-new")) == 40


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path
