"""Choosing the multiplexer driver: ``[driver] name``."""

from __future__ import annotations

import inspect

from orcr_core.config import Config
from orcr_core.contracts import Availability
from orcr_core.pm.plugins import Registry

INSTALL_HINT = (
    "install herdr (https://herdr.dev) or tmux >= 3.2 (apt-get install tmux / brew install tmux)"
)


class NoDriver(Exception):
    code = "no_driver"


def availability(factory, config: Config | None = None) -> tuple[bool, str]:
    """``factory.available(config)`` (or ``available()`` for drivers that take none)."""
    if not isinstance(factory, Availability):
        return True, "no availability check"
    check = factory.available
    try:
        params = inspect.signature(check).parameters
    except (TypeError, ValueError):
        params = {}
    return check(config) if params else check()


def choose_driver(config: Config, registry: Registry):
    """Return ``(factory, why)``; ``auto`` prefers herdr, then tmux."""
    name = config.get("driver.name", "auto")
    if name != "auto":
        factory = registry.drivers.get(name)
        if factory is None:
            known = ", ".join(sorted(registry.drivers)) or "none"
            raise NoDriver(f"[driver] name = {name!r} is not installed; installed drivers: {known}")
        ok, why = availability(factory, config)
        if not ok:
            raise NoDriver(f"driver {name!r} cannot run: {why}")
        return factory, f"[driver] name = {name!r}"
    reasons = []
    for candidate in ("herdr", "tmux"):
        factory = registry.drivers.get(candidate)
        if factory is None:
            reasons.append(f"{candidate}: plugin not loaded")
            continue
        ok, why = availability(factory, config)
        if ok:
            return factory, f"auto: {candidate} ({why})"
        reasons.append(f"{candidate}: {why}")
    raise NoDriver("no multiplexer found (" + "; ".join(reasons) + "); " + INSTALL_HINT)
