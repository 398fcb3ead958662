"""The times users write: dates, times, ages — one reading for --until, --since and until."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import pytest

from driftwatch.errors import UserError
from driftwatch.when import parse_when

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)


def test_ages_count_from_now_either_way() -> None:
    assert parse_when("7d", now=NOW, end_of_day=True) == NOW + timedelta(days=7)
    assert parse_when("12h", now=NOW, end_of_day=False, relative_sign=-1) == NOW - timedelta(hours=12)
    assert parse_when("2w", now=NOW, end_of_day=True) == NOW + timedelta(weeks=2)
    assert parse_when("30m", now=NOW, end_of_day=True) == NOW + timedelta(minutes=30)


def test_a_date_is_the_whole_day_for_until_and_its_start_for_since() -> None:
    until = parse_when("2026-12-07", now=NOW, end_of_day=True)
    since = parse_when("2026-12-07", now=NOW, end_of_day=False)
    assert until - since == timedelta(days=1)
    assert since == datetime(2026, 12, 7).astimezone().astimezone(timezone.utc)  # this machine's midnight
    assert parse_when(date(2026, 12, 7), now=NOW, end_of_day=True) == until  # a TOML date


def test_times_with_a_zone_are_kept_and_come_back_in_utc() -> None:
    assert parse_when("2026-12-07T18:00Z", now=NOW, end_of_day=True) == datetime(2026, 12, 7, 18, tzinfo=timezone.utc)
    assert parse_when("2026-12-07 18:00+02:00", now=NOW, end_of_day=True) == datetime(2026, 12, 7, 16, tzinfo=timezone.utc)


@pytest.mark.parametrize("text", ["soon", "7 days", "2026-13-01", "", "d7"])
def test_anything_else_is_one_line_naming_the_forms(text: str) -> None:
    with pytest.raises(UserError, match="is not a time: write a date"):
        parse_when(text, now=NOW, end_of_day=True)


def test_a_config_refuses_ages() -> None:
    with pytest.raises(UserError, match="an age"):
        parse_when("7d", now=NOW, end_of_day=True, relative=False)
