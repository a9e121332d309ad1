"""Which herdr releases orcr drives, and what each one can do.

herdr numbers its socket protocol: 0.8.0 as tagged answers ``ping`` with 19,
the rest of the 0.8 line with 20, every 0.9 release (0.9.0 ... 0.9.3 and
later 0.9.x) with 22. Protocol 21 only ever existed on herdr's development
branches: no release reported it, so orcr refuses it like any number it does
not know (HERDR-0.9.md §1).
"""

from __future__ import annotations

from typing import Any

from orcr_core.contracts import DriverError

#: socket protocol -> the herdr releases that speak it
PROTOCOLS = {19: "0.8.0", 20: "0.8.x", 22: "0.9.x"}
SUPPORTED_PROTOCOLS = frozenset(PROTOCOLS)
REQUIRED_VERSION = "herdr 0.9.x (socket protocol 22) or 0.8.x (socket protocol 19 or 20)"
#: the first protocol with 0.9's behaviour (live-edge subscriptions, close_group, ...)
HERDR_09 = 22


def check_pong(pong: dict, where: str, session: str) -> dict[str, Any]:
    """The facts of a ``ping`` reply, or :class:`DriverError` for a protocol orcr
    does not speak (naming the versions it does)."""
    protocol, version = pong.get("protocol"), pong.get("version", "?")
    if protocol not in SUPPORTED_PROTOCOLS:
        raise DriverError(
            f"herdr {version} at {where} speaks socket protocol {protocol}; "
            f"orcr supports {REQUIRED_VERSION}: install herdr 0.9 (or 0.8) and restart "
            f"its server (herdr session stop {session})",
            code="unsupported_herdr_protocol",
        )
    caps = pong.get("capabilities")
    caps = caps if isinstance(caps, dict) else {}
    return {
        "version": version,
        "protocol": protocol,
        # what ping says the server can do (0.9 adds health_check, surface_interest, ...)
        "capabilities": {k: v for k, v in sorted(caps.items()) if v not in (None, False)},
    }
