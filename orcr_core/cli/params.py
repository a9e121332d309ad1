"""Option values the verbs share: a prompt read from stdin, a --timeout's duration.

Import-light (the client path loads it): the config's duration parser and the
protocol's turn limit are imported when a value is checked.
"""

from __future__ import annotations

import re
import sys

import click


def stdin_prompt() -> str:
    """A prompt from stdin, read as bytes: bytes that are not UTF-8 are kept (as
    surrogates) so the check refuses them naming their offset, whatever the locale."""
    return sys.stdin.buffer.read().decode("utf-8", "surrogateescape")


def duration(ctx, param, value, limit: float | None = None):
    """A --timeout: a duration over 0s (and at most ``limit``), else a usage error (exit 2)."""
    if value is None:
        return None
    from orcr_core.config import ConfigError, parse_duration

    allowed = "more than 0s" + (f" and at most {_human(limit)}" if limit else "")
    try:
        seconds = float(value) if _NUMBER.fullmatch(value) else parse_duration(value, param.name)
    except ConfigError:
        raise click.BadParameter(
            f"{value!r} is not a duration: give a number with a unit (ms, s, m, h, d), "
            f"e.g. 30s, 5m, 1h30m; {allowed}"
        ) from None
    if seconds <= 0:
        raise click.BadParameter(f"{value!r} is too short: a timeout is {allowed}, e.g. 30s")
    if limit is not None and seconds > limit:
        raise click.BadParameter(f"{value!r} is over the limit: a turn timeout is {allowed}")
    return seconds


_NUMBER = re.compile(r"\d+(?:\.\d+)?")  # a bare number is seconds


def gc_after(ctx, param, value):
    """--gc-after: a duration from 1s to 365d (timings.gc_after's range)."""
    if value is None:
        return None
    from orcr_core.config import ConfigError, parse_duration

    allowed = "a duration from 1s to 365d, e.g. 10m, 2h, 7d"
    try:
        seconds = float(value) if _NUMBER.fullmatch(value) else parse_duration(value, param.name)
    except ConfigError:
        raise click.BadParameter(f"{value!r} is not a duration: give {allowed}") from None
    if not 1 <= seconds <= 365 * 86400:
        raise click.BadParameter(f"{value!r} is out of range: give {allowed}")
    return seconds


def turn_timeout(ctx, param, value):
    from orcr_core.protocol import MAX_TURN_TIMEOUT

    return duration(ctx, param, value, limit=MAX_TURN_TIMEOUT)


def _human(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"
