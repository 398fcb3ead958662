"""The doctor report: the same findings in every form, host text escaped at the edge."""

from __future__ import annotations

import io
import json

from rich.console import Console

from driftwatch.report.doctor import HostReport, headline, print_terminal, render_markdown
from driftwatch.rules.registry import diagnose
from tests.rules.builders import SGLANG, make_snapshot, processes, server

HOSTILE = "0\x1b[2J\x1b]8;;https://evil.example\x07,1"


def report() -> HostReport:
    snap = make_snapshot(processes=processes(server(*SGLANG, "--tp", "8", env={"CUDA_VISIBLE_DEVICES": HOSTILE})))
    return HostReport("gpu01", "stored snapshot snapshots/gpu01/x.json", diagnose(snap))


def terminal(reports: list[HostReport]) -> str:
    out = io.StringIO()
    print_terminal(Console(file=out, width=200, force_terminal=False), reports)
    return out.getvalue()


def test_every_form_names_the_finding_its_fix_and_reference() -> None:
    r = report()
    assert r.exit_code == 2 and headline(r).startswith("gpu01: 1 known-bad state (1 critical); 1 note")
    text = terminal([r])
    assert "visible-devices-below-parallelism [predicted] CUDA_VISIBLE_DEVICES=" in text
    assert "fix: list 8 GPUs in CUDA_VISIBLE_DEVICES" in text and "NOTES (1)" in text
    markdown = render_markdown([r])
    assert "| critical | visible-devices-below-parallelism | predicted |" in markdown
    document = json.loads(json.dumps(r.to_json()))
    assert {"host", "source", "exit_code", "findings", "counts", "not_run"} <= set(document)
    assert document["findings"][0]["reference"].startswith("https://docs.nvidia.com/cuda/")


def test_host_text_is_escaped_in_every_form() -> None:
    r = report()
    assert "\x1b" not in terminal([r]) and "\x07" not in terminal([r])
    assert "\x1b" not in render_markdown([r]) and "](" not in render_markdown([r])


def test_an_unreachable_host_is_an_error_line() -> None:
    r = HostReport("gpu09", "no snapshot", error="connection refused")
    assert r.exit_code == 1 and terminal([r]).startswith("gpu09: connection refused")
