"""When an EventBridge schedule last came due: ``traingrid tick`` fires a schedule for that time,
as EventBridge does (its event's ``time`` is the scheduled time, not the delivery's).

``cron(minutes hours day-of-month month day-of-week year)`` in UTC, with ``*``, ``?``, numbers,
ranges, lists, ``/`` steps and JAN-DEC / SUN-SAT names (day-of-week 1-7 is SUN-SAT); ``L``,
``W`` and ``#`` are not supported. ``rate(N unit)`` comes due every N units from midnight UTC
(EventBridge counts from when the rule was created; the emulator has no such moment to keep).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

MONTHS = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
DAYS = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]
# (lowest, highest, names counted from lowest) of each cron field
FIELDS = [(0, 59, None), (0, 23, None), (1, 31, None), (1, 12, MONTHS), (1, 7, DAYS),
          (1970, 2199, None)]
RATE = re.compile(r"^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$")
CRON = re.compile(r"^cron\((.+)\)$")
MAX_LOOKBACK = timedelta(days=366)


def _values(text: str, lowest: int, highest: int, names: list[str] | None) -> set[int] | None:
    """The values a field allows; None for any (``*`` or ``?``)."""
    if text in ("*", "?"):
        return None
    for index, name in enumerate(names or []):
        text = text.upper().replace(name, str(lowest + index))
    if re.search(r"[A-Za-z#]", text):
        raise ValueError(f"{text!r}: L, W and # are not supported here")
    allowed: set[int] = set()
    for part in text.split(","):
        span, _, step = part.partition("/")
        if span == "*":
            start, end = lowest, highest
        elif "-" in span:
            start, end = (int(x) for x in span.split("-", 1))
        else:
            start = int(span)
            end = highest if step else start
        if not lowest <= start <= end <= highest:
            raise ValueError(f"{part!r} is outside {lowest}-{highest}")
        allowed |= set(range(start, end + 1, int(step) if step else 1))
    return allowed


def _matches(fields: list[set[int] | None], moment: datetime) -> bool:
    day_of_week = (moment.weekday() + 1) % 7 + 1  # Monday is 2, Sunday 1
    actual = [moment.minute, moment.hour, moment.day, moment.month, day_of_week, moment.year]
    return all(allowed is None or value in allowed for allowed, value in zip(fields, actual,
                                                                             strict=True))


def interval_seconds(expression: str, now: datetime | None = None) -> int:
    """How often a ``rate(...)`` schedule comes due; for a cron schedule, the gap between the
    last two times it came due before ``now`` (at least a minute)."""
    if rate := RATE.match(expression):
        unit = {"minute": 60, "hour": 3600, "day": 86400}[rate.group(2).rstrip("s")]
        return int(rate.group(1)) * unit
    due = last_due(expression, now or datetime.now(UTC))
    before = last_due(expression, due - timedelta(minutes=1))
    return max(60, int((due - before).total_seconds()))


def last_due(expression: str, now: datetime) -> datetime:
    """The latest time at or before ``now`` when the schedule comes due."""
    now = now.astimezone(UTC).replace(second=0, microsecond=0)
    if rate := RATE.match(expression):
        unit = {"minute": 1, "hour": 60, "day": 24 * 60}[rate.group(2).rstrip("s")]
        every = timedelta(minutes=int(rate.group(1)) * unit)
        midnight = now.replace(hour=0, minute=0)
        return now - (now - midnight) % every
    cron = CRON.match(expression)
    if not cron or len(parts := cron.group(1).split()) != 6:
        raise ValueError(f"{expression!r} is not an EventBridge schedule expression")
    fields = [_values(part, *spec) for part, spec in zip(parts, FIELDS, strict=True)]
    moment = now
    while now - moment <= MAX_LOOKBACK:
        if _matches(fields, moment):
            return moment
        moment -= timedelta(minutes=1)
    raise ValueError(f"{expression!r} did not come due in the year before {now:%Y-%m-%d}")
