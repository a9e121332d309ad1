"""The value checks of configuration keys: durations, sizes, ranges, names,
prices and budget windows. Each check takes ``(key, value)`` and returns the
value as orcr uses it, or raises :class:`ConfigError` naming the key, the value
and what is allowed (its ``allowed`` attribute, which docs/configuration.md
repeats)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from orcr_core.common.sizes import SIZE as _SIZE
from orcr_core.common.sizes import SIZE_UNITS as _SIZE_UNITS
from orcr_core.common.times import UNITS as _UNITS
from orcr_core.common.times import ConfigError, off, parse_duration  # noqa: F401 (re-exported)

NAME = re.compile(r"[a-z0-9_]+")
_BARE = re.compile(r"[A-Za-z0-9_-]+")
_KEY_PART = re.compile(r"\s*(?:\"([^\"]*)\"|'([^']*)'|([A-Za-z0-9_-]+))\s*(\.|$)")


def split_key(key: str) -> list[str]:
    """A dotted key's parts, quoted parts as TOML reads them:
    ``budget."nightly/review".tokens`` -> ``["budget", "nightly/review", "tokens"]``."""
    parts, pos = [], 0
    while pos < len(key):
        m = _KEY_PART.match(key, pos)
        if not m or m.end() == pos:
            raise ConfigError(
                f"{key!r} is not a dotted key; quote a part with / in it as TOML does: "
                'budget."nightly/review".tokens'
            )
        parts.append(next(g for g in m.groups()[:3] if g is not None))
        pos = m.end()
        if m.group(4) == "." and pos == len(key):
            raise ConfigError(f"{key!r} ends with a dot")
    return parts


def join_key(parts: list[str]) -> str:
    """The dotted key of ``parts``, a part that is not a bare TOML key quoted."""
    return ".".join(p if _BARE.fullmatch(p) else f'"{p}"' for p in parts)


#: ``[concurrency]`` keys that are not a provider's cap.
GLOBAL_CONCURRENCY_KEYS = ("max", "min_free_memory", "max_memory_pressure")

MEMORY_HELP = (
    "use a size (2GiB, 512MiB), a share of RAM (10%), auto (the smaller of 10% of RAM "
    "and 2 GiB) or 0 (off)"
)


def memory_floor(value: Any, total: int, key: str = "concurrency.min_free_memory") -> int:
    """The free-memory floor in bytes for a machine with ``total`` bytes of RAM."""
    if value is None or value == "auto":
        return min(total // 10, 2 * 2**30)
    if isinstance(value, bool):
        raise ConfigError(f"{key} = {value!r} is not allowed; {MEMORY_HELP}")
    if isinstance(value, int | float) and value >= 0:
        return int(value)  # bytes; 0 turns the check off
    text = str(value).strip()
    if text == "0":
        return 0
    if text.endswith("%"):
        try:
            share = float(text[:-1])
        except ValueError:
            share = -1.0
        if 0 <= share < 100:
            return int(total * share / 100)
    elif m := _SIZE.fullmatch(text):
        return int(float(m.group(1)) * _SIZE_UNITS[m.group(2)])
    raise ConfigError(f"{key} = {value!r} is not allowed; {MEMORY_HELP}")


def _memory(key: str, value: Any) -> Any:
    memory_floor(value, 2**40, key)
    return value


#: the largest cap orcr accepts: far beyond what one machine can run
MAX_CAP = 10_000
MAX_RETENTION = 100_000_000


def _int_range(lo: int, hi: int) -> Callable[[str, Any], int]:
    def check(key: str, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            raise ConfigError(
                f"{key} = {value!r} is not allowed; use a whole number from {lo:,} to {hi:,}"
            )
        return value

    check.allowed = f"whole number {lo:,}..{hi:,}"  # type: ignore[attr-defined]
    return check


def _fmt_seconds(s: float) -> str:
    if s == 0:
        return "0s"
    for unit in ("d", "h", "m", "s"):
        if s >= _UNITS[unit] and s % _UNITS[unit] == 0:
            return f"{s / _UNITS[unit]:g}{unit}"
    return f"{s * 1000:g}ms"


def _duration_range(lo: float, hi: float) -> Callable[[str, Any], Any]:
    """A duration from ``lo`` to ``hi`` seconds."""

    def check(key: str, value: Any) -> Any:
        seconds = parse_duration(value, key)
        if not lo <= seconds <= hi:
            raise ConfigError(
                f"{key} = {value!r} is out of range; use a duration from "
                f"{_fmt_seconds(lo)} to {_fmt_seconds(hi)}"
            )
        return value

    check.allowed = f"duration {_fmt_seconds(lo)}..{_fmt_seconds(hi)}"  # type: ignore[attr-defined]
    return check


def _duration_or_off(lo: float, hi: float) -> Callable[[str, Any], Any]:
    """``0`` (off) or a duration from ``lo`` to ``hi`` seconds."""

    def check(key: str, value: Any) -> Any:
        if off(value):
            return value
        seconds = parse_duration(value, key)  # not a duration: says so
        if not lo <= seconds <= hi:
            raise ConfigError(
                f"{key} = {value!r} is out of range; use 0 (off) or a duration from "
                f"{_fmt_seconds(lo)} to {_fmt_seconds(hi)}"
            )
        return value

    check.allowed = f"0 (off) or duration {_fmt_seconds(lo)}..{_fmt_seconds(hi)}"  # type: ignore[attr-defined]
    return check


def _string(key: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"{key} = {value!r} is not allowed; use a string")
    return value


def _nonempty(key: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{key} = {value!r} is not allowed; use a non-empty string")
    return value


def _name(key: str, value: Any) -> str:
    if not isinstance(value, str) or not NAME.fullmatch(value):
        raise ConfigError(f"{key} = {value!r} is not allowed; use a name of [a-z0-9_]+")
    return value


def _bool(key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{key} = {value!r} is not allowed; use true or false")
    return value


def _argv(key: str, value: Any) -> list:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value) or not value:
        raise ConfigError(f"{key} = {value!r} is not allowed; use a non-empty list of strings")
    return value


def _str_list(key: str, value: Any) -> list:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{key} = {value!r} is not allowed; use a list of strings")
    return value


def _path_list(key: str, value: Any) -> list:
    """Absolute paths or ``~/`` paths (the sandbox's allow_read, allow_write, deny_read)."""
    _str_list(key, value)
    for v in value:
        if not (v.startswith("/") or v == "~" or v.startswith("~/")):
            raise ConfigError(f"{key}: {v!r} is not allowed; use absolute or ~/ paths")
    return value


_NET = re.compile(r"^(\*|[A-Za-z0-9.-]+|\[[0-9a-fA-F:]+\])(:[0-9]{1,5})?$")


def _net_list(key: str, value: Any) -> list:
    """The sandbox's allow_net: ``host``, ``host:port`` or ``*``."""
    _str_list(key, value)
    for v in value:
        if not _NET.match(v):
            raise ConfigError(f"{key}: {v!r} is not allowed; use host, host:port or *")
    return value


_path_list.allowed = "list of absolute or ~/ paths"  # type: ignore[attr-defined]
_net_list.allowed = "list of host, host:port or *"  # type: ignore[attr-defined]
_memory.allowed = "a size"  # type: ignore[attr-defined]
_string.allowed = "string"  # type: ignore[attr-defined]
_nonempty.allowed = "non-empty string"  # type: ignore[attr-defined]
_name.allowed = "[a-z0-9_]+"  # type: ignore[attr-defined]
_bool.allowed = "true/false"  # type: ignore[attr-defined]
_argv.allowed = "non-empty list of strings"  # type: ignore[attr-defined]
_str_list.allowed = "list of strings"  # type: ignore[attr-defined]


PRICE_FIELDS = ("input", "output", "cache_read", "cache_write")


def _prices(key: str, value: Any) -> list:
    """``[[usage.prices]]``: ``model`` and its prices per million tokens (docs/usage.md)."""
    ok = isinstance(value, list) and all(
        isinstance(p, dict)
        and isinstance(p.get("model"), str)
        and set(p) <= {"model", *PRICE_FIELDS}
        and all(
            isinstance(p.get(f, 0), int | float)
            and not isinstance(p.get(f, 0), bool)
            and p.get(f, 0) >= 0
            for f in PRICE_FIELDS
        )
        for p in value
    )
    if not ok:
        raise ConfigError(
            f"{key} = {value!r} is not allowed; use a list of tables with a model and "
            f"prices >= 0 per million tokens for {', '.join(PRICE_FIELDS)}"
        )
    return value


_prices.allowed = "list of {model, input, output, cache_read, cache_write} tables"  # type: ignore[attr-defined]


#: a budget's window (``budget.<scope>.per``): a calendar period in the server's zone
CALENDAR_WINDOWS = ("day", "week", "month")
MAX_BUDGET = 10**15  # tokens: far beyond any quota


def _window(key: str, value: Any) -> Any:
    """``day``, ``week``, ``month`` (calendar, local zone) or a rolling duration 1m..366d."""
    if value in CALENDAR_WINDOWS:
        return value
    try:
        seconds = parse_duration(value, key)
    except ConfigError:
        seconds = -1.0
    if isinstance(value, bool) or not 60 <= seconds <= 366 * 86400:
        raise ConfigError(
            f"{key} = {value!r} is not allowed; use day, week or month (calendar, in the "
            "server's time zone) or a rolling duration from 1m to 366d (e.g. 1h, 1d, 7d)"
        )
    return value


_window.allowed = "day, week, month or duration 1m..366d"  # type: ignore[attr-defined]


def _rule(check: Callable[[str, Any], Any]) -> Callable[[str, Any], Any]:
    """A ``notify.rules.<rule>.<option>`` key: the rule must be one orcr knows."""

    def wrapped(key: str, value: Any) -> Any:
        from orcr_core.notify.rules import RULES

        rule = key.split(".")[2]
        if rule not in RULES:
            raise ConfigError(f"{key}: no rule {rule!r}; the rules: {', '.join(RULES)}")
        return check(key, value)

    wrapped.allowed = check.allowed  # type: ignore[attr-defined]
    return wrapped


def _limit(key: str, value: Any) -> Any:
    """``limits.*``: checked by :func:`orcr_core.ceilings.check_value`."""
    from orcr_core.ceilings import LimitsError, check_value

    try:
        return check_value(key, value)
    except LimitsError as exc:
        raise ConfigError(str(exc)) from None


_limit.allowed = "see docs/ceilings.md"  # type: ignore[attr-defined]


def _pressure(key: str, value: Any) -> Any:
    if value == "off" or (
        not isinstance(value, bool) and isinstance(value, int | float) and 0 < value <= 100
    ):
        return value
    raise ConfigError(
        f"{key} = {value!r} is not allowed; use a percentage above 0 and up to 100 "
        "(the some avg10 of /proc/pressure/memory) or off"
    )


_pressure.allowed = "percentage 0 < n <= 100, or off"  # type: ignore[attr-defined]
