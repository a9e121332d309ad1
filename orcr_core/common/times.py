"""Time as text: a timestamp's ISO form (:func:`iso`) and durations
(:func:`parse_duration`, :func:`off`).

A leaf: the config's checks, the notification rules, loops, the server's JSON and
``orcr top`` all use it, and it imports nothing of orcr's. :class:`ConfigError`
lives here because a bad duration raises it; :mod:`orcr_core.config` re-exports it
(and these functions) as its own.
"""

from __future__ import annotations

import functools
import re
from datetime import UTC, datetime
from typing import Any, Literal

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
#: seconds per duration unit
UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}


class ConfigError(ValueError):
    """A bad key or value; the message names the key, the value and what is allowed."""


def iso(
    ts: float | None, timespec: Literal["milliseconds", "seconds"] = "milliseconds"
) -> str | None:
    """``ts`` (epoch seconds) as UTC ISO 8601 with a ``Z``, e.g. ``2026-05-28T20:28:00.123Z``;
    None stays None."""
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec=timespec).replace("+00:00", "Z")


def parse_duration(value: Any, key: str = "duration") -> float:
    """``"2m"`` -> 120.0; ``"1h30m"``, ``"250ms"``, plain numbers (seconds) too."""
    if isinstance(value, bool):
        raise ConfigError(f"{key} = {value!r} is not a duration; use e.g. 30s, 2m, 1h30m")
    if isinstance(value, int | float):
        if value < 0:
            raise ConfigError(f"{key} = {value!r} is negative; use a duration >= 0")
        return float(value)
    total = _parse_text(str(value).strip())
    if total is None:
        raise ConfigError(
            f"{key} = {value!r} is not a duration; use a number of seconds or units "
            "ms, s, m, h, d (e.g. 30s, 2m, 1h30m)"
        )
    return total


@functools.lru_cache(maxsize=512)
def _parse_text(text: str) -> float | None:
    """A duration's seconds, None if ``text`` is not one. Cached: the server reads
    the same few config durations (``timings.*``) for every agent at every step."""
    pos, total = 0, 0.0
    for m in _DURATION.finditer(text):
        if m.start() != pos:
            break
        total += float(m.group(1)) * UNITS[m.group(2)]
        pos = m.end()
    if not text or pos != len(text):
        return None
    return total


def off(value: Any) -> bool:
    """Whether a ``0 (off)`` duration key is off: ``0``, ``"0"`` or any zero duration."""
    if value in (0, "0") and not isinstance(value, bool):
        return True
    try:
        return parse_duration(value) == 0
    except ConfigError:
        return False
