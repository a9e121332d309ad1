"""When a loop fires: five-field cron in a stored time zone, with cronie's DST rules.

croniter walks the wall clock; the time zone turns each wall-clock time into
an instant. croniter's own zone handling is not used: on a fall-back night it
fires a daily 01:30 job twice (at 01:30 EDT and again at 01:30 EST). orcr
follows cronie (``man 8 cron``, "Daylight Saving Time and other time changes"):

* a **fixed-time** job (neither the minute nor the hour field starts with
  ``*``) whose time falls in a skipped hour runs once, right after the gap
  (at the instant the clocks jump); one whose time falls in a repeated hour
  runs once, at the first of the two occurrences;
* a **wildcard** job (``*`` or ``*/n`` in the minute or hour field) follows the
  wall clock: nothing in a skipped hour, every matching time in a repeated
  hour (both passes).

Instants are float seconds since the epoch (UTC), as the store keeps them.
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

#: search at most this far ahead for a next fire (``0 0 30 2 *`` never fires)
HORIZON = timedelta(days=366 * 5)
_RELATIVE = re.compile(r"(\d+(?:\.\d+)?)(s|m|h|d)")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_LOCAL = re.compile(r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(:\d{2})?")
#: RFC 3339 with a T or a space (what ``date --rfc-3339=seconds`` prints)
_STAMP = re.compile(r"\d{4}-\d{2}-\d{2}[ Tt]\d{2}:\d{2}")


class CadenceError(ValueError):
    """A bad cron expression, zone or time; the message says what is allowed."""


def zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ValueError, KeyError, OSError, TypeError):
        from orcr_core.loops.zone import zone_message

        raise CadenceError(zone_message(name)) from None


#: the macros cronie accepts, as the five fields they stand for
MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
FIELDS = (
    ("minute", "0-59"),
    ("hour", "0-23"),
    ("day-of-month", "1-31"),
    ("month", "1-12 or jan-dec"),
    ("day-of-week", "0-7 or sun-sat"),
)
RULE = (
    "a cron expression has five fields: minute hour day-of-month month day-of-week "
    "(each *, a number, a-b, a,b or */n), or one of " + ", ".join(MACROS)
)
#: croniter's own extensions (hashed H, random R): not cron, refused
_EXTENSION = re.compile(r"(?:^|,)[HR](?:\(|/|,|$)", re.I)
_FIELD_OK = re.compile(r"[0-9a-zA-Z*/,\-]+")


def _croniter_ok(expr: str) -> bool:
    # croniter (and dateutil under it) imports only where a cron is read: ~9 ms that
    # every server start paid, loops or none
    from croniter import CroniterBadCronError, croniter

    try:
        croniter(expr, datetime(2000, 1, 1))
    except (CroniterBadCronError, ValueError, KeyError, TypeError):
        return False
    return True


def validate_cron(expr: str) -> str:
    """Return the expression normalised to single spaces (a macro to its five
    fields), or raise CadenceError naming the bad field; croniter's own words
    (its hash and seconds extensions) never reach the user."""
    text = expr.strip()
    if text.startswith("@"):
        if text.lower() not in MACROS:
            raise CadenceError(f"{expr!r} is not a cron macro; {RULE}")
        return MACROS[text.lower()]
    fields = text.split()
    if len(fields) != 5:
        raise CadenceError(f"{expr!r} has {len(fields)} fields; {RULE}, e.g. '0 9 * * 1-5'")
    for i, (field, (what, allowed)) in enumerate(zip(fields, FIELDS, strict=True)):
        probe = " ".join(field if j == i else "*" for j in range(5))
        if not _FIELD_OK.fullmatch(field) or _EXTENSION.search(field) or not _croniter_ok(probe):
            raise CadenceError(
                f"{expr!r}: the {what} field {field!r} is not valid (allowed: {allowed}); {RULE}"
            )
    norm = " ".join(fields)
    if not _croniter_ok(norm):
        raise CadenceError(f"{expr!r} is not a valid cron expression; {RULE}")
    return norm


def is_fixed_time(expr: str) -> bool:
    """cronie's test: a job is fixed-time unless its minute or hour field starts with ``*``."""
    minute, hour = expr.split()[:2]
    return not (minute.startswith("*") or hour.startswith("*"))


def _instants(naive: datetime, tz: ZoneInfo, fixed: bool) -> list[datetime]:
    """The UTC instants a wall-clock time ``naive`` fires at in ``tz``."""
    first = naive.replace(tzinfo=tz, fold=0).astimezone(UTC)
    second = naive.replace(tzinfo=tz, fold=1).astimezone(UTC)
    if first == second:
        return [first]
    if first.astimezone(tz).replace(tzinfo=None) == naive:  # a repeated wall time
        return [first] if fixed else [first, second]
    # a skipped wall time: fold=1 reads it with the offset after the jump, so the
    # jump lies between ``second`` and ``first``
    return [_transition(second, first, tz)] if fixed else []


def _transition(lo: datetime, hi: datetime, tz: ZoneInfo) -> datetime:
    """The instant in (lo, hi] where the zone's offset changes (to the second)."""
    before = lo.astimezone(tz).utcoffset()
    lo_s, hi_s = int(lo.timestamp()), int(hi.timestamp())
    while hi_s - lo_s > 1:
        mid = (lo_s + hi_s) // 2
        if datetime.fromtimestamp(mid, tz).utcoffset() == before:
            lo_s = mid
        else:
            hi_s = mid
    return datetime.fromtimestamp(hi_s, UTC)


def next_fire(expr: str, tz_name: str, after: float) -> float | None:
    """The first fire strictly after ``after`` (None when there is none within 5 years)."""
    from croniter import CroniterBadDateError, croniter

    tz = zone(tz_name)
    fixed = is_fixed_time(expr)
    after_dt = datetime.fromtimestamp(after, UTC)
    local = after_dt.astimezone(tz).replace(tzinfo=None)
    # near an offset change, wall-clock times before ``local`` can map to later
    # instants (the second pass of a repeated hour): start the walk earlier
    window = timedelta(hours=3)
    offsets = {datetime.fromtimestamp(after + d, tz).utcoffset() for d in (-10800, 0, 10800)}
    start = local - window if len(offsets) > 1 else local
    it = croniter(expr, start)
    best: datetime | None = None
    limit = local + HORIZON
    while True:
        try:
            naive = it.get_next(datetime)
        except CroniterBadDateError:
            break
        if naive > limit:
            break
        if best is not None:
            lower = min(
                naive.replace(tzinfo=tz, fold=0).astimezone(UTC),
                naive.replace(tzinfo=tz, fold=1).astimezone(UTC),
            )
            if lower >= best:  # every later wall time maps to a later instant
                break
        for inst in _instants(naive, tz, fixed):
            if inst > after_dt and (best is None or inst < best):
                best = inst
    return best.timestamp() if best is not None else None


def fires(expr: str, tz_name: str, after: float, count: int) -> list[float]:
    out: list[float] = []
    t = after
    for _ in range(count):
        nxt = next_fire(expr, tz_name, t)
        if nxt is None:
            break
        out.append(nxt)
        t = nxt
    return out


def count_between(expr: str, tz_name: str, after: float, until: float, cap: int = 1000):
    """(number of fires in (after, until], the first one, the next fire after ``until``).

    Counting stops at ``cap`` (the count is then a lower bound): a minutely loop
    through a week of downtime is one event row, not ten thousand.
    """
    n, first, t = 0, None, after
    while True:
        nxt = next_fire(expr, tz_name, t)
        if nxt is None or nxt > until:
            return n, first, nxt
        if n >= cap:
            return n, first, next_fire(expr, tz_name, until)
        n += 1
        first = first if first is not None else nxt
        t = nxt


def parse_when(text: str, tz_name: str, now: float | None = None, relative: bool = True) -> float:
    """``--once-at``/``--from``: ``30m`` (relative), RFC 3339 with an offset, or a
    local ``YYYY-MM-DD[ T]HH:MM[:SS]`` in ``tz_name``. Returns a UTC instant.

    A local time in a skipped hour is refused (it never happens); one in a
    repeated hour means its first occurrence.
    """
    now = time.time() if now is None else now
    text = text.strip()
    forms = (
        "a duration like 30m or 1h30m, RFC 3339 like 2026-03-08T09:00:00+01:00 "
        "(or with a space for the T), or a local YYYY-MM-DD HH:MM[:SS]"
    )
    if relative and text and _RELATIVE.match(text):
        pos, total = 0, 0.0
        for m in _RELATIVE.finditer(text):
            if m.start() != pos:
                break
            total += float(m.group(1)) * _UNITS[m.group(2)]
            pos = m.end()
        if pos == len(text):
            if total <= 0:
                raise CadenceError(f"{text!r} must be longer than 0s")
            return now + total
    tz = zone(tz_name)
    if _LOCAL.fullmatch(text):
        try:
            naive = datetime.fromisoformat(text.replace(" ", "T"))
        except ValueError as exc:
            raise CadenceError(f"{text!r} is not a real date and time ({exc})") from None
        inst = _instants(naive, tz, fixed=True)
        first = naive.replace(tzinfo=tz, fold=0)
        if first.astimezone(UTC).astimezone(tz).replace(tzinfo=None) != naive:
            raise CadenceError(
                f"{text} does not exist in {tz_name} (the clocks skip it); pick another time"
            )
        return inst[0].timestamp()
    if not _STAMP.match(text):
        raise CadenceError(f"{text!r} is not a time; use {forms}")
    try:
        parsed = datetime.fromisoformat(text.replace("z", "Z").replace("Z", "+00:00"))
    except ValueError as exc:
        raise CadenceError(f"{text!r} is not a real date and time ({exc}); use {forms}") from None
    if parsed.tzinfo is None:
        raise CadenceError(f"{text!r} is not a time; use {forms}")
    return parsed.timestamp()


def iso_utc(ts: float) -> str:
    """``2026-03-08T07:00:00Z`` (whole seconds unless the instant has a fraction)."""
    dt = datetime.fromtimestamp(ts, UTC)
    spec = "seconds" if dt.microsecond == 0 else "milliseconds"
    return dt.isoformat(timespec=spec).replace("+00:00", "Z")


def iso_local(ts: float, tz_name: str) -> str:
    dt = datetime.fromtimestamp(ts, zone(tz_name))
    return dt.isoformat(timespec="seconds") + f" {dt.tzname()}"
