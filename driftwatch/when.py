"""Points in time a user writes: ``2026-12-07``, ``2026-12-07T18:00``, ``7d``, ``12h``.

One parser for ``accept --until``, ``history --since`` and ``[[ignore]] until``, so they
read the same words the same way. Naive times are the local time of the machine running
driftwatch; everything comes back as an aware UTC datetime. A date alone is the start of
that day for ``--since`` and the end of it for an ``until`` ("until Friday" includes Friday).
Relative forms count from ``now``; a config file may not use them (a rule "until 7d" would
never expire), so ``parse_when`` takes ``relative=False`` there. A moment past what a
datetime holds (``--until 9999-12-31``, a realistic "forever", or ``99999999d``) is the
last (or, counting back, the first) moment there is: "never" and "ever since".
"""

from __future__ import annotations

import re
from datetime import date, datetime, time, timedelta, timezone

from driftwatch.errors import UserError

NEVER = datetime.max.replace(tzinfo=timezone.utc)  # "until 9999-12-31": it never expires
EVER = datetime.min.replace(tzinfo=timezone.utc)  # "since 9999999999w": since the beginning

_RELATIVE = re.compile(r"(\d+(?:\.\d+)?)\s*(m|min|h|d|w)", re.IGNORECASE)
_UNIT_S = {"m": 60, "min": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
FORMS = "a date (2026-12-07), a time (2026-12-07T18:00, local unless it says +00:00 or Z) or an age (30m, 12h, 7d, 2w)"


def parse_when(
    value: str | date | datetime, *, now: datetime, end_of_day: bool, relative_sign: int = 1, relative: bool = True
) -> datetime:
    """``value`` as an aware UTC datetime; a one-line UserError when it is none of ``FORMS``.

    ``relative_sign`` says which way an age counts: +1 into the future (``--until 7d``),
    -1 into the past (``--since 7d``).
    """
    if isinstance(value, (datetime, date)):  # from TOML
        try:
            return _aware(value) if isinstance(value, datetime) else _day(value, end_of_day)
        except OverflowError:
            return NEVER if value.year > 1 else EVER
    text = value.strip()
    age = _RELATIVE.fullmatch(text)
    if age:
        if not relative:
            raise UserError(f"{value!r} is an age, which would move with every run: write a date such as 2026-12-07")
        seconds = float(age.group(1)) * _UNIT_S[age.group(2).lower()]
        try:
            return now.astimezone(timezone.utc) + relative_sign * timedelta(seconds=seconds)
        except OverflowError:  # past the year 9999 (or before the year 1)
            return NEVER if relative_sign > 0 else EVER
    try:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
            return _day(date.fromisoformat(text), end_of_day)
        return _aware(datetime.fromisoformat(text.replace("Z", "+00:00").replace(" ", "T", 1)))
    except OverflowError:  # 9999-12-31's end, or a time zone carrying a moment past the year 9999 (or 1)
        return NEVER if not text.startswith("0001") else EVER
    except ValueError:
        forms = FORMS if relative else FORMS.split(" or an age")[0].replace("), a time", ") or a time")
        raise UserError(f"{value!r} is not a time: write {forms}") from None


def _day(day: date, end_of_day: bool) -> datetime:
    start = datetime.combine(day + timedelta(days=1) if end_of_day else day, time(0))
    return _aware(start)


def _aware(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        moment = moment.astimezone()  # local time of this machine
    return moment.astimezone(timezone.utc)


def shown(moment: datetime) -> str:
    """``2026-12-07 18:00 UTC``: minutes are enough for a person."""
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
