"""A budget's window (``budget.<scope>.per``): where it starts and when it frees.

Import-light (no peewee). ``day``, ``week`` (from Monday) and ``month`` are
calendar periods in the server's local time zone: the window starts at the
period's first midnight and rolls over at the next period's. A duration
(``1h``, ``7d``) is a rolling window: the last ``per`` seconds, so a turn's
tokens leave it ``per`` seconds after the turn ended.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta

from orcr_core.config import CALENDAR_WINDOWS, parse_duration


def rolling(per: str | float) -> float | None:
    """The rolling window's length in seconds, or None for a calendar period."""
    return None if per in CALENDAR_WINDOWS else parse_duration(per)


def calendar(per: str, now: float) -> tuple[float, float]:
    """(start, end) of the calendar period holding ``now``, local time."""
    day = datetime.fromtimestamp(now).replace(hour=0, minute=0, second=0, microsecond=0)
    if per == "week":
        start = day - timedelta(days=day.weekday())
        end = start + timedelta(days=7)
    elif per == "month":
        start = day.replace(day=1)
        end = (start + timedelta(days=32)).replace(day=1)
    else:
        start, end = day, day + timedelta(days=1)
    # naive local datetimes -> epoch through mktime, so a DST change is honoured
    return _epoch(start), _epoch(end)


def _epoch(dt: datetime) -> float:
    return time.mktime((dt.year, dt.month, dt.day, 0, 0, 0, 0, 0, -1))


def start(per: str, now: float) -> float:
    """Where the window holding ``now`` starts."""
    length = rolling(per)
    return now - length if length is not None else calendar(per, now)[0]


def clock(at: float | None) -> str:
    """A local time as the held reason shows it."""
    if at is None:
        return "the budget is raised"
    return time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(at)).strip()
