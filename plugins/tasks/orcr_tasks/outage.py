"""Riding an orcr server outage: how a worker keeps its claim while orcr is away.

A worker rides an orcr server restart (``kill -9``, ``orcr server stop``, an
upgrade) the way ``orcr agent wait`` does: every call to orcr that finds the
server gone is retried on a fresh connection (which starts a server, as any
verb does) while the loop keeps the claim's heartbeat fresh, so the turn the
agent finished meanwhile is read and no attempt is charged for orcr's own
outage. Only an outage longer than ``--stale`` gives the claim back, untouched,
and stops the worker (:class:`ServerOutage`, handled in :mod:`orcr_tasks.worker`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from orcr_core.sdk.client import ServerError

#: error codes that mean orcr itself is away (stopping, restarting), not the agent or task
OUTAGE = (
    "connection_closed",
    "server_not_running",
    "server_start_failed",
    "server_stopping",
    "socket_missing",
)


class ServerOutage(Exception):
    """orcr stayed unreachable for longer than the worker rides an outage."""


def ride(
    orcr: Any,
    call: Callable[[], Any],
    *,
    away: Callable[[Exception], None],
    keep_claim: Callable[[], None],
    stop: threading.Event,
    limit: float,
    heartbeat: float,
) -> Any:
    """``call()``, retried on a fresh connection while the orcr server is away (an
    error with an :data:`OUTAGE` code, or an ``OSError``): ``away(exc)`` once when the
    outage starts, ``keep_claim()`` between tries; :class:`ServerOutage` after
    ``limit`` seconds away, or once ``stop`` is set."""
    since, delay = None, 0.1
    while True:
        try:
            return call()
        except (ServerError, OSError) as exc:
            if isinstance(exc, ServerError) and exc.code not in OUTAGE:
                raise
            now = time.monotonic()
            if since is None:
                since = now
                away(exc)
            elif now - since > limit:
                raise ServerOutage(
                    f"the orcr server was unreachable for {now - since:.0f}s ({exc})"
                ) from None
        orcr.close()  # the next call connects afresh (starting a server, as verbs do)
        keep_claim()
        if stop.wait(delay):
            raise ServerOutage("the worker is stopping")
        delay = min(delay * 2, heartbeat, 2.0)
