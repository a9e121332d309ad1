"""The ``server.status`` answer: what ``orcr server status``, ``doctor`` and ``top`` show.

One report of the running server's state, read from the parts it names (the
multiplexer, the memory ledger, the usage limits, the scheduler, the notifier, the
monitor) and from the store; written against :class:`ServerContext`, so it reads
only what that Protocol names.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

from orcr_core import __version__
from orcr_core.agents import queue, unmanaged
from orcr_core.ceilings import step as ceilings_step
from orcr_core.protocol import PROTOCOL_VERSION
from orcr_core.server.shapes import iso
from orcr_core.store import drift, events
from orcr_core.store.db import SCHEMA_VERSION
from orcr_core.store.models import LIVE, Agent, db
from orcr_core.usage import budgets

if TYPE_CHECKING:
    from orcr_core.server.context import ServerContext


def report(server: ServerContext) -> dict:
    """The running server's state, as ``server.status`` answers it."""
    drift_now = drift.snapshot()
    counts = queue.live_counts()
    caps = {"max": server.config.cap()}
    providers = {}
    configured = set(server.config.provider_caps())  # a cap for a provider not installed too
    for name in sorted(set(server.registry.providers) | set(counts) | configured):
        providers[name] = {
            "live": counts.get(name, 0),
            "cap": server.config.cap(name),
            "installed": name in server.registry.providers,
        }
    return {
        "pid": os.getpid(),
        "version": __version__,
        "protocol": PROTOCOL_VERSION,
        "store": str(server.store_path),
        "schema_version": SCHEMA_VERSION,
        "socket": str(server.socket_path),
        "uptime": round(time.time() - server.started_at, 3),
        "queue_depth": queue.queue_depth(),
        "held": server.held,
        # providers whose queue a usage limit holds, and why (orcr_core/usage_limits)
        "usage_limits": server.usage_limits.held(server),
        # an edit of the config file that was not applied, and why (config/watch.py)
        "config_error": server.config_error,
        # token budgets: each scope's spend in its window, the queued agents it holds
        "budgets": budgets.status(server),
        # available memory, the floor, what loading agents reserve, the estimates
        "memory": server.memory.read(server, server.config).as_dict(),
        "ceilings": ceilings_step.status(server.config),  # mechanism, fleet, pressure
        "live": sum(counts.values()),
        "caps": caps,
        "providers": providers,
        "driver": server.mux.status(),
        "drift": {name: value for name, (value, _at) in drift_now.items()},
        "drift_at": {name: iso(at) for name, (_value, at) in drift_now.items()},
        "lost": Agent.select().where(Agent.status == "lost").count(),
        "unmanaged": unmanaged.live_count(),  # herdr agents in the user's other sessions
        "stalled": Agent.select()
        .where((Agent.status == "working") & Agent.stalled_at.is_null(False))
        .count(),
        # live agents whose pane is in the parking area (agents/parking.py)
        "parked": Agent.select()
        .where(Agent.status.in_(LIVE) & Agent.parked_at.is_null(False))
        .count(),
        "blocked": [
            {"path": a.path, "uuid": a.uuid, "reason": a.blocked_reason}
            for a in Agent.select()
            .where(Agent.status.in_(("starting", "working")) & Agent.blocked_reason.is_null(False))
            .order_by(Agent.id)
        ],
        "last_seq": events.last_seq(),
        "loops": server.loops.status() if server.loops is not None else None,
        "notify": server.notifier.status() if server.notifier is not None else None,
        "write_transactions": db.write_transactions,
        "monitor": server.monitor.status(),
    }
