"""The stalled flag: a ``working`` agent whose transcript stopped growing.

A flag, not a status (issue 10, item 10): peers' users find agents "Thinking"
for hours on an exhausted quota. When a working agent's transcript has not
grown for ``timings.stall_after`` the row gets ``stalled_at`` and an
``agent.stalled`` event (``stalled: true``); the next growth clears it with
another (``stalled: false``), the shape ``orcr top`` follows. Any status change
out of ``working`` clears it too (:func:`orcr_core.agents.lifecycle.transition`).

The clock is the transcript file's modification time (or the turn's start, if
later): both persist across a server restart, so a restart neither resets nor
skips it, and ``stalled_at`` in the row keeps the events from repeating. Nothing
polls for it: the monitor arms one timer per working agent at
``grew_at + stall_after`` (:meth:`orcr_core.agents.monitor.Monitor._arm_stall`);
when it falls due the agent is visited, flagged if it is still silent, or the
timer is armed again at the later deadline its growth moved it to.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from orcr_core.agents import lifecycle, transcripts
from orcr_core.store import events
from orcr_core.store.models import Agent, db

if TYPE_CHECKING:
    from orcr_core.server.context import ServerContext


def grew_at(server: ServerContext, agent: Agent) -> float | None:
    """When the agent's transcript last grew (its mtime), at least the turn's start;
    None while its transcript has not been located."""
    path = transcripts.path_of(server, agent.uuid)
    if not path:
        return None
    try:
        mtime = os.stat(path).st_mtime
    except OSError:
        return None
    return max(mtime, agent.turn_started_at or 0.0)


def deadline(server: ServerContext, agent: Agent) -> float | None:
    """When a silent working agent is flagged; None if it is not watched for stalls
    (not working, already flagged, no transcript yet, or ``stall_after = 0``)."""
    if agent.status != "working" or agent.stalled_at is not None or agent.blocked_reason:
        return None  # a question waiting for a person is no stall (agents/asking.py)
    if server.usage_limits.noticed(agent.uuid) is not None:
        return None  # waiting out a usage limit is no stall (orcr_core/usage_limits)
    after = server.config.duration("timings.stall_after")
    if after <= 0:
        return None
    grew = grew_at(server, agent)
    return None if grew is None else grew + after


def check(server: ServerContext, agent: Agent, now: float) -> None:
    """Set or clear the flag of one working agent whose transcript was just read."""
    if agent.status != "working":
        return
    grew = grew_at(server, agent)
    if grew is None:
        return
    if agent.stalled_at is None:
        if agent.blocked_reason or server.usage_limits.noticed(agent.uuid) is not None:
            return  # a person is asked, or a usage limit waited out: quiet, not stalled
        after = server.config.duration("timings.stall_after")
        if after > 0 and now - grew >= after:
            _flag(server, agent, now, silent_for=round(now - grew, 3))
    elif grew > agent.stalled_at:
        _flag(server, agent, None, stalled_for=round(grew - agent.stalled_at, 3))


def _flag(server: ServerContext, agent: Agent, stalled_at: float | None, **data) -> None:
    with db.atomic("IMMEDIATE"):
        current = Agent.get_by_id(agent.id)
        if current.status != "working" or (current.stalled_at is None) == (stalled_at is None):
            agent.stalled_at = current.stalled_at
            return
        lifecycle.update(current, None, stalled_at=stalled_at)
        events.emit(
            "agent.stalled", current.uuid, path=current.path, stalled=stalled_at is not None, **data
        )
    agent.stalled_at = stalled_at
    server.notify()
