"""walk_history on snapshots built in code: steps oldest first, filtered, damaged files counted."""

from __future__ import annotations

import copy
from datetime import datetime, timezone

from driftwatch.diff import DiffOptions
from driftwatch.history import HistoryQuery, walk_history
from driftwatch.model import Snapshot
from driftwatch.triage.ignore import Ignoring
from driftwatch.severity import Severity
from tests.diff.builders import T0, baseline, dists, make_snapshot
from tests.diff.test_launch import SGLANG, logs, processes
from tests.seed import seed_log

NOW = datetime(2026, 12, 1, tzinfo=timezone.utc)


def timeline() -> list[Snapshot | None]:
    """Five snapshots an hour apart: NCCL upgraded at 1h and at 3h, a file touched at 2h
    (same content: context), only volatile readings move at 4h; one damaged file at 2.5h."""
    facts = baseline()
    snaps: list[Snapshot | None] = [make_snapshot(minutes=0)]
    dists(facts)["nvidia-nccl-cu12"].update(version="2.27.7", record_sha256="rec-2.27.7")
    snaps.append(make_snapshot(minutes=60, **copy.deepcopy(facts)))
    path = next(iter(facts["files"]["files"]))
    facts["files"]["files"][path]["mtime"] += 600
    snaps.append(make_snapshot(minutes=120, **copy.deepcopy(facts)))
    snaps.append(None)
    dists(facts)["nvidia-nccl-cu12"].update(version="2.28.3", record_sha256="rec-2.28.3")
    snaps.append(make_snapshot(minutes=180, **copy.deepcopy(facts)))
    facts["system"]["volatile"]["uptime_s"] = 99.0
    snaps.append(make_snapshot(minutes=240, **copy.deepcopy(facts)))
    return snaps


def query(**kw: object) -> HistoryQuery:
    return HistoryQuery("gpu01", DiffOptions(), Ignoring([], {}, NOW), **kw)  # type: ignore[arg-type]


def test_every_step_oldest_first_and_volatile_readings_are_no_step() -> None:
    history = walk_history(timeline(), query())
    assert [s.after.taken_at.hour - T0.hour for s in history.steps] == [1, 2, 3]
    assert history.snapshots == 5 and history.unreadable == 1
    first, touched, second = history.steps
    assert [c.item for c in first.drift][:1] == ["nvidia-nccl-cu12"]
    assert touched.drift == [] and [c.status for c in touched.changes] == ["context"]
    assert second.unreadable_between == 1 and second.before.taken_at.hour - T0.hour == 2


def test_item_gives_one_things_timeline() -> None:
    history = walk_history(timeline(), query(pattern="nccl"))
    assert len(history.steps) == 2
    assert all(any("nccl" in str(c.item) for c in s.changes) for s in history.steps)
    news = [c.new for s in history.steps for c in s.changes if c.item == "nvidia-nccl-cu12"]
    assert news == ["2.27.7", "2.28.3"]


def test_since_keeps_the_steps_seen_from_then_on() -> None:
    since = T0.replace(hour=T0.hour + 2)
    history = walk_history(timeline(), query(since=since))
    assert [s.after.taken_at for s in history.steps] == [since, since.replace(hour=since.hour + 1)]


def test_json_has_each_step_with_its_times() -> None:
    document = walk_history(timeline(), query(pattern="nccl")).to_json()
    assert document["summary"] == {"snapshots": 5, "unreadable": 1, "steps": 2, "changes": 2, "context": 0, "ignored": 0}
    step = document["steps"][0]
    assert step["at"] == "2026-02-19T11:00:00+00:00" and step["from"]["taken_at"] == "2026-02-19T10:00:00+00:00"
    assert {c["status"] for c in step["changes"]} == {"drift"}


def test_a_removed_override_is_a_recovery_told_before_and_after() -> None:
    # Good (auto-detected 0.88), then `--mem-fraction-static 0.55` fails, then the flag is
    # removed while NCCL is upgraded in the same step: the second step is no "good run".
    def state(minutes: int, *flags: str, fails: bool, nccl: str = "2.27.3") -> Snapshot:
        facts = baseline()
        dists(facts)["nvidia-nccl-cu12"].update(version=nccl, record_sha256=f"rec-{nccl}")
        fraction = float(flags[-1]) if flags else 0.88
        return make_snapshot(minutes=minutes, processes=processes(*SGLANG, *flags),
                             logs=logs(seed_log(fraction, fails=fails)), **facts)

    snaps: list[Snapshot | None] = [state(0, fails=False), state(60, "--mem-fraction-static", "0.55", fails=True),
                                    state(120, fails=False, nccl="2.27.7")]
    broke, fixed = walk_history(snaps, query()).steps
    [worse] = [c for c in broke.drift if c.item == "mem_fraction_static"]
    assert "auto-detected 0.88" in worse.explanation and "good run" not in worse.explanation
    [back] = [c for c in fixed.drift if c.item == "mem_fraction_static"]
    text = back.explanation
    assert "good run" not in text and "before " in text and "; after " in text, text
    assert text.startswith("recovery: --mem-fraction-static no longer set explicitly (0.55)") and "known-bad state gone" in text
    assert back.severity is Severity.low and fixed.drift[-1] is back  # below the NCCL upgrade
    assert fixed.drift[0].item != "mem_fraction_static"
