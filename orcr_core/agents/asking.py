"""A working agent that asks a person: a permission prompt in the middle of a turn.

Neither CLI writes a pending question to its transcript (TRANSCRIPTS.md 1.5 and
2.5): the turn just goes quiet. So once a working agent's transcript has been
quiet for ``timings.blocked_after`` (or its adapter guesses ``blocked`` sooner:
Claude Code's AskUserQuestion is pending) the monitor reads its screen
(``Driver.read``) and asks the provider's ``screen_state`` hook what it shows.
A question there (Claude Code's "Do you want to proceed?", Codex's "Would you
like to run the following command?") gives the row a ``blocked_reason`` and an
``agent.blocked`` event; the status stays ``working``, because the turn is not
over: answered, it goes on. The reason is cleared (``agent.unblocked``) when
the transcript grows again, the question leaves the screen, or the turn ends
(:func:`orcr_core.agents.lifecycle.transition`).

A provider with no ``screen_state`` hook has only its adapter's labelled guess
(``TurnState.state == "blocked"``: a tool call pending and the transcript quiet),
which is reported as such. The screen of a quiet agent is read at most every
:data:`RECHECK` seconds, and only while it is quiet: a busy fleet reads no screens.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from orcr_core.agents import lifecycle, stall
from orcr_core.agents.launch import launch_spec, pane_of
from orcr_core.contracts import DriverError, TurnState
from orcr_core.store import events
from orcr_core.store.models import Agent, db

if TYPE_CHECKING:
    from orcr_core.server.context import ServerContext

log = logging.getLogger("orcr.asking")

#: seconds between two looks at the screen of one quiet working agent
RECHECK = 1.0


def check(server: ServerContext, agent: Agent, state: TurnState, provider, now: float) -> None:
    """Set, change or clear the blocked reason of a working agent just read."""
    if agent.status != "working":
        return
    grew = stall.grew_at(server, agent)
    if agent.blocked_reason and grew is not None and grew > (agent.blocked_at or now):
        _clear(server, agent, "the transcript moved on")  # answered: the turn goes on
        return
    limited = server.usage_limits.noticed(agent.uuid)  # waiting out a usage limit
    if limited is not None and grew is not None and grew > limited:
        server.usage_limits.over(server, agent, "the transcript moved on")  # the CLI went on
    hook = getattr(provider, "screen_state", None)
    if hook is None:  # the adapter's guess is all there is
        if state.state == "blocked" and not agent.blocked_reason:
            _block(server, agent, "permission", _guess(agent))
        elif state.state != "blocked" and agent.blocked_reason:
            _clear(server, agent, "the turn moved on")
        return
    quiet_for = now - grew if grew is not None else 0.0
    if not (
        agent.blocked_reason
        or state.state == "blocked"
        or quiet_for >= server.config.duration("timings.blocked_after")
    ):
        return
    checked = server.dialog_checked.get(agent.uuid, 0.0)
    if time.monotonic() - checked < RECHECK:
        return
    server.dialog_checked[agent.uuid] = time.monotonic()
    pane = pane_of(agent)
    if pane is None or server.driver is None:
        return
    try:
        screen = server.driver.read(pane)
    except DriverError:
        return  # a pane gone is the monitor's business, not this check's
    shown = hook(screen, launch_spec(server, agent))
    if shown.state == "waiting" and shown.kind == "usage_limit":  # orcr_core/usage_limits
        server.usage_limits.seen(server, agent, shown.reason or "usage limit", shown.until)
        if agent.stalled_at is not None:  # quiet because it waits the limit out: no stall
            stall._flag(server, agent, None, waiting="usage_limit")
        return
    if server.usage_limits.noticed(agent.uuid) is not None:
        server.usage_limits.over(server, agent, "the limit left the screen")
    if shown.state == "dialog" and shown.reason:
        if shown.reason != agent.blocked_reason:
            _block(server, agent, shown.kind or "question", shown.reason)
    elif agent.blocked_reason:
        _clear(server, agent, "the question left the screen")


def _guess(agent: Agent) -> str:
    return (
        f"{agent.provider} may be waiting for a permission answer (a tool call is pending and its "
        f"transcript is quiet) — look with `orcr agent attach {agent.path}`"
    )


def _block(server: ServerContext, agent: Agent, kind: str, reason: str) -> None:
    with db.atomic("IMMEDIATE"):
        current = Agent.get_by_id(agent.id)
        if current.status != "working" or current.blocked_reason == reason:
            return
        fields = {"blocked_reason": reason, "blocked_at": time.time()}
        if current.stalled_at is not None:  # quiet because it asks: no stall after all
            fields["stalled_at"] = None
            events.emit("agent.stalled", current.uuid, path=current.path, stalled=False)
        lifecycle.update(current, None, **fields)
        events.emit(
            "agent.blocked",
            current.uuid,
            path=current.path,
            dialog=kind,
            reason=reason,
            status="working",
            turn=current.turn,
        )
    agent.__data__.update(current.__data__)
    server.notify()


def _clear(server: ServerContext, agent: Agent, why: str) -> None:
    with db.atomic("IMMEDIATE"):
        current = Agent.get_by_id(agent.id)
        if current.status != "working" or not current.blocked_reason:
            return
        lifecycle.update(current, None, blocked_reason=None, blocked_at=None)
        events.emit("agent.unblocked", current.uuid, path=current.path, why=why)
    agent.__data__.update(current.__data__)
    server.dialog_checked.pop(agent.uuid, None)
    server.notify()
