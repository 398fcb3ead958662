"""Acceptances laid over a diff: accepted, changed again, expired — never silently extended."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from driftwatch.diff import Change, Severity

from driftwatch.explain import DiffResult
from driftwatch.triage.accept import Acceptance, accept_changes, merge, revoke, select
from driftwatch.triage.apply import triage
from driftwatch.triage.ignore import Ignoring
from tests.diff.builders import diff_after

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)
DRIVER = Change("driver", "driver", "595.71.05", "610.57.04", Severity.critical, "NVIDIA driver 595.71.05 → 610.57.04")
RESERVED = Change("gpu", "GPU-0", 408, 400, Severity.medium, "GPU 0 reserved memory (MiB) 408 → 400", label="GPU 0 (RTX)")
TOTAL = Change("gpu", "GPU-0", 8192, 8000, Severity.high, "GPU 0 total memory (MiB) 8192 → 8000", label="GPU 0 (RTX)")
PROBE = Change("probe", "gpu", "ok", "timeout", Severity.high, "the gpu probe timed out")
TOUCHED = Change("file", "/a.py", 1, 2, Severity.info, "/a.py touched, same content", context=True)


def accepted(change: Change, *, until: datetime | None = None, new: object = None) -> Acceptance:
    base = Acceptance.of(change, reason="driver rollout", by="alice@ops", at=NOW - timedelta(days=1), until=until)
    return base if new is None else Acceptance(**{**base.__dict__, "new": new})


def test_an_accepted_change_is_not_drift_and_says_who_and_why() -> None:
    [driver, reserved] = accept_changes([DRIVER, RESERVED], [accepted(DRIVER)], NOW)
    assert driver.status == "accepted" and not driver.drift
    assert driver.waiver is not None and (driver.waiver.by, driver.waiver.reason) == ("alice@ops", "driver rollout")
    assert reserved.drift and reserved.waiver is None  # only what was accepted


def test_a_different_new_value_counts_again_and_says_so() -> None:
    further = Change("driver", "driver", "595.71.05", "615.10", Severity.critical, "NVIDIA driver 595.71.05 → 615.10")
    [change] = accept_changes([further], [accepted(DRIVER)], NOW)
    assert change.drift
    assert change.lapsed.startswith("changed again since accepted (accepted 595.71.05 → 610.57.04 by alice@ops")


def test_an_expired_acceptance_counts_again_and_is_never_extended() -> None:
    [change] = accept_changes([DRIVER], [accepted(DRIVER, until=NOW - timedelta(seconds=1))], NOW)
    assert change.drift and change.lapsed.startswith("acceptance expired 2026-12-01 11:59 UTC")
    [still] = accept_changes([DRIVER], [accepted(DRIVER, until=NOW + timedelta(hours=1))], NOW)
    assert still.status == "accepted"


def test_two_fields_of_one_gpu_are_told_apart_by_their_baseline_value() -> None:
    """Both are ("gpu", "GPU-0"): accepting the reserved memory says nothing about the total."""
    [reserved, total] = accept_changes([RESERVED, TOTAL], [accepted(RESERVED)], NOW)
    assert reserved.status == "accepted"
    assert total.drift and total.lapsed == ""


def test_context_changes_are_left_alone() -> None:
    assert accept_changes([TOUCHED], [accepted(TOUCHED)], NOW) == [TOUCHED]


def test_select_takes_the_drift_but_a_failed_probe_only_by_name() -> None:
    chosen, unmatched = select([DRIVER, PROBE, TOUCHED], [])
    assert chosen == [DRIVER] and unmatched == []
    chosen, unmatched = select([DRIVER, PROBE, TOUCHED], ["probe:gpu", "sgl-kernel", "/a.py"])
    assert chosen == [PROBE]
    assert unmatched == ["sgl-kernel", "/a.py"]  # a context change needs no accepting


def test_accepting_again_replaces_and_revoke_names_or_takes_all() -> None:
    first = [accepted(DRIVER), accepted(RESERVED)]
    again = Acceptance.of(DRIVER, reason="extended by a person", by="bob@ops", at=NOW, until=None)
    book, replaced = merge(first, [again])
    assert [a.reason for a in book] == ["driver rollout", "extended by a person"]
    assert replaced == [(first[0], again)]  # said by the command, never silent
    kept, gone, unmatched = revoke(book, ["gpu:GPU 0*", "nothing-like-this"])
    assert [a.category for a in kept] == ["driver"] and [a.category for a in gone] == ["gpu"]
    assert unmatched == ["nothing-like-this"]
    assert revoke(book, []) == ([], book, [])


def test_an_acceptance_survives_the_store_round_trip() -> None:
    original = accepted(RESERVED, until=NOW + timedelta(days=7))
    back = Acceptance.from_json(original.to_json())
    assert back == original
    assert accept_changes([RESERVED], [back], NOW)[0].status == "accepted"


def test_triage_recounts_the_summary_and_ranks_drift_first() -> None:
    def upgrade(facts: dict) -> None:
        facts["gpu"]["driver_version"] = "595.71.05"
        facts["python"]["interpreters"]["python3"]["distributions"]["requests"]["version"] = "2.32.4"

    result = diff_after(upgrade)
    driver = next(c for c in result.changes if c.category == "driver")
    assert result.changes[0] is driver
    waived = triage(result, host="gpu01", ignoring=Ignoring([], {}, NOW), acceptances=[accepted(driver)])
    assert isinstance(waived, DiffResult)
    assert waived.summary["accepted"] == 1 and waived.summary["total"] == result.summary["total"] - 1
    assert waived.summary["counts"]["critical"] == result.summary["counts"]["critical"] - 1
    assert waived.changes[-1].status == "accepted"  # after every drifting change
    assert driver not in waived.drift_changes and "NVIDIA driver" not in (waived.summary["most_likely_cause"] or "")
