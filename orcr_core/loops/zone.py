"""The local IANA time zone name. Import-light: the SDK sends it with ``loop.create``.

A loop's cadence is evaluated in the zone it was created in, which is the
caller's zone, not the server's (the server may have been started from another
environment).
"""

from __future__ import annotations

import os
from pathlib import Path


def valid_zone(name: str) -> bool:
    from zoneinfo import ZoneInfo

    try:
        ZoneInfo(name)
    except (ValueError, KeyError, OSError):  # ZoneInfoNotFoundError is a KeyError
        return False
    return True


def local_zone_name() -> str:
    """``$TZ`` when it names a zone, else ``/etc/localtime``'s target, else ``UTC``."""
    tz = os.environ.get("TZ", "").lstrip(":")
    if tz and valid_zone(tz):
        return tz
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
