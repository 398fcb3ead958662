"""The headline: one sentence of at most 200 characters, the rest in the detail, nothing twice."""

from __future__ import annotations

from driftwatch.commands.check import alert_payload
from driftwatch.cron.alerts import AlertKind
from driftwatch.explain import diff_snapshots
from driftwatch.report.diff import headline
from tests.diff.builders import make_snapshot
from tests.diff.test_launch import SGLANG, logs, processes
from tests.seed import seed_log


def incident() -> object:
    good = make_snapshot(processes=processes(*SGLANG), logs=logs(seed_log(0.88, fails=False)))
    bad = make_snapshot(minutes=60, processes=processes(*SGLANG, "--mem-fraction-static", "0.55"),
                        logs=logs(seed_log(0.55, fails=True)))
    return diff_snapshots(good, bad)


def test_the_headline_is_one_short_sentence_and_the_detail_says_each_thing_once() -> None:
    result = incident()
    line = headline(result)
    # What broke first (the logged failure, once), then the cause under it, then the count.
    assert len(line) <= 200 and line.startswith("new kv-budget error (8×): RuntimeError: Not enough memory"), line
    assert "; most likely cause: --mem-fraction-static set explicitly to 0.55" in line and line.endswith("(5 changes)")
    assert line.count("KV") <= 1 and line.count("Not enough memory") == 1
    [change] = [c for c in result.drift_changes if c.item == "mem_fraction_static"]
    detail = change.explanation  # the CRITICAL line: the KV arithmetic, the failure and the fix, once each
    assert detail.count("Not enough memory") == 1 and detail.count("cannot start") == 1, detail
    assert "Fix: raise --mem-fraction-static" in detail
    alert = alert_payload("gpu01", "good", AlertKind.drift, result)
    assert len(alert["text"]) <= 200 and "most likely cause: --mem-fraction-static set explicitly to 0.55" in alert["text"]


def test_the_markdown_table_reads_as_the_headline_what_broke_first() -> None:
    from driftwatch.report.diff import render_markdown

    result = incident()
    rows = [line for line in render_markdown(result).splitlines() if line.startswith("| ") and "---" not in line][1:]
    observed = [row for row in rows if row.split("|")[1].strip().endswith("(observed)")]
    assert observed and rows[: len(observed)] == observed, rows  # the symptoms head the table
    causes = rows[len(observed):]
    assert causes[0].startswith("| critical | launch-arg | mem_fraction_static |"), causes  # then the most likely cause
