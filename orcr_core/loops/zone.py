"""The local IANA time zone name. Import-light: the SDK sends it with ``loop.create``.

A loop's cadence is evaluated in the zone it was created in, which is the
caller's zone, not the server's (the server may have been started from another
environment).
"""

from __future__ import annotations

import os
import re
from pathlib import Path


def valid_zone(name: str) -> bool:
    from zoneinfo import ZoneInfo

    try:
        ZoneInfo(name)
    except (ValueError, KeyError, OSError):  # ZoneInfoNotFoundError is a KeyError
        return False
    return True


class ZoneError(ValueError):
    """``$TZ`` is set to something that is not an IANA zone name."""


#: a POSIX TZ rule such as ``EST5EDT,M3.2.0,M11.1.0`` or ``CET-1CEST``
_POSIX = re.compile(r"[A-Za-z<>+-]{3,}[+-]?\d")


def zone_message(name) -> str:
    names = "an IANA name such as Europe/Paris, America/New_York or UTC"
    if isinstance(name, str) and _POSIX.match(name):
        return (
            f"{name!r} is a POSIX TZ rule, not a zone name: orcr needs {names} "
            "(it knows the zone's past and future DST changes, a rule does not)"
        )
    return f"unknown time zone {name!r}; use {names}"


def local_zone_name() -> str:
    """``$TZ`` when it names a zone, else ``/etc/localtime``'s target, else ``UTC``.

    A ``$TZ`` that is set but names no zone (a POSIX rule, a typo) is refused
    with :class:`ZoneError` rather than silently replaced by the machine's zone.
    A ``$TZ`` of ``:/path`` or a path falls through to ``/etc/localtime``."""
    tz = os.environ.get("TZ", "").lstrip(":")
    if tz and valid_zone(tz):
        return tz
    if tz and not tz.startswith("/"):
        raise ZoneError(f"$TZ: {zone_message(tz)}; set TZ to one, or give --tz")
    try:
        target = str(Path("/etc/localtime").resolve())
    except OSError:
        target = ""
    if "zoneinfo/" in target:
        name = target.split("zoneinfo/", 1)[1]
        if valid_zone(name):
            return name
    try:
        name = Path("/etc/timezone").read_text().strip()
        if name and valid_zone(name):
            return name
    except OSError:
        pass
    return "UTC"
