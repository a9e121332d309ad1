"""Pane presence from one multiplexer snapshot: rematches, losses, repairs.

The monitor (:mod:`orcr_core.agents.monitor`) takes a snapshot when a pane may
have changed and hands every active row to :func:`observe`. A row's pane is the
one carrying this instance's id and the row's launch token; a pane gone is a
loss confirmed by one following snapshot at least ``LOST_CONFIRM`` later, and a
pane that comes back repairs the row.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

from orcr_core.agents import lifecycle, native, pipeline, procs, rematch, resume
from orcr_core.agents.launch import owned
from orcr_core.ceilings import step as ceilings_step
from orcr_core.contracts import DriverError
from orcr_core.store import drift, events
from orcr_core.store.models import EXIT_REASONS, Agent, Event, db

if TYPE_CHECKING:
    from orcr_core.server.context import ServerContext

LOST_CONFIRM = 1.0  # seconds: the least time between lost and ended (lost)


def observe(server: ServerContext, active: list[Agent]) -> None:
    """Pane presence, lost/repaired, session pointers, from one snapshot."""
    driver = server.driver
    if driver is None:
        return
    try:
        snap = driver.snapshot()
    except DriverError:
        return  # an outage never frees a name
    # a row's pane is the one carrying this instance's id and the row's launch
    # token, whatever its id or label (another instance may share the server)
    mine = owned(snap)
    running = []  # (agent, pane): their process trees are recorded below
    for agent in active:
        if agent.status == "starting" or not agent.pane_id:
            if agent.status == "starting" and agent.pane_id:
                pane = mine.get(agent.launch_token)
                if pane is not None and not agent.pane_process:
                    with db.atomic("IMMEDIATE"):
                        rematch.record(agent, pane)  # who orcr started in the pane
                if not agent.agent_session_value:
                    _capture_session(agent, pane)
            continue
        pane = mine.get(agent.launch_token)
        if pane is None:
            if not agent.cancel_requested:  # a kill closing its pane is not a loss
                _vanished(server, agent)
            continue
        if pane.dead:
            pipeline.end(server, agent, "exited")
            continue
        if rematch.replaced(agent, pane):
            # another process: the agent restored by the multiplexer itself (herdr
            # 0.9's resume_argv), a restore still under way, or a shell in its place
            found = "other" if agent.cancel_requested else native.restored(server, agent, pane)
            if found == "wait":
                native.awaiting(agent, pane)
                _confirm_later(server, time.monotonic())  # look again shortly
                continue
            if found != "agent" or not native.adopt(server, agent, pane):
                if not agent.cancel_requested:
                    rematch.lose(server, agent, pane)
                continue
        if native.exited(server, agent, pane):  # a job in a restored pane's shell
            pipeline.end(server, agent, "exited")
            continue
        running.append((agent, pane))
        monitor = getattr(server, "monitor", None)
        if monitor is not None:
            # herdr's status of a pane orcr's own report holds witnesses nothing
            tracked = pane.agent is not None and not native.owns_status(agent, pane)
            monitor.witness.observe(agent.uuid, agent.status, tracked, pane.completion_seq)
        if (
            pane.pane_id != agent.pane_id
            or agent.status == "lost"
            or (not agent.agent_session_value and pane.agent_session is not None)
            or (not agent.pane_process and not pane.dead and rematch.identity(pane) is not None)
        ):
            _pane_changed(server, agent, pane)  # else nothing changed: no write at all
        native.report(server, agent, pane)  # herdr 0.9: how to resume it (once per process)
        if (
            agent.provider in server.registry.providers
            and not server.registry.providers[agent.provider].has_transcript
        ):
            agent._mux_status = pane.agent_status
    procs.observe(server, running)


def _pane_changed(server: ServerContext, agent: Agent, pane) -> None:
    """Record what a snapshot shows differently: a rematch, a repair, a session."""
    with db.atomic("IMMEDIATE"):
        current = Agent.get_by_id(agent.id)
        if current.status == "ended":
            return
        if pane.pane_id != current.pane_id:
            lifecycle.update(
                current,
                "agent.rematched",
                pane_id=pane.pane_id,
                tab_id=pane.tab_id,
                workspace_id=pane.workspace_id,
            )
        if current.status == "lost":
            back = "idle" if current.idle_since else "working"
            if lifecycle.transition(current, back, repair=True):
                drift.bump("repaired")  # in the transaction of the repair it counts
        rematch.record(current, pane)
        if not current.agent_session_value:
            _capture_session(current, pane)
        agent.__data__.update(current.__data__)


def _capture_session(agent: Agent, pane) -> None:
    if pane is None or pane.agent_session is None:
        return
    s = pane.agent_session
    with db.atomic("IMMEDIATE"):
        fields = dict(
            agent_session_source=s.source, agent_session_kind=s.kind, agent_session_value=s.value
        )
        if agent.status == "starting":
            fields["last_progress_at"] = time.time()  # a progress marker
        lifecycle.update(agent, "agent.session", **fields)


def _vanished(server: ServerContext, agent: Agent) -> None:
    exited = agent.pane_id in server.exited_panes
    if agent.status == "lost" and not exited:
        first_seen = server.lost_at.setdefault(agent.uuid, time.monotonic())
        if time.monotonic() - first_seen < LOST_CONFIRM:
            _confirm_later(server, first_seen)
            return  # not yet: no write transaction
    with db.atomic("IMMEDIATE"):
        agent = Agent.get_by_id(agent.id)
        if agent.cancel_requested:
            return  # the kill that closed the pane ends the row itself
        exited = agent.pane_id in server.exited_panes  # the multiplexer saw the process end
        closing = closing_why(agent)
        if closing is not None:
            # orcr was closing this pane (the close failed, or the write of its applied
            # did: a full disk) and it is gone now: the close is done
            events.emit(
                "pane.close_applied", agent.uuid, path=agent.path, pane_id=agent.pane_id, gone=True
            )
        if closing in EXIT_REASONS and agent.status in ("working", "idle", "lost"):
            # an end's close (idle GC, a timeout, the program's exit): the row ends as
            # that end meant, never lost (and resumed) in between
            lifecycle.transition(agent, "ended", closing)
        elif agent.status in ("working", "idle"):
            if exited:
                lifecycle.transition(agent, "ended", "exited", pane_id=agent.pane_id)
            else:
                if lifecycle.transition(agent, "lost", pane_id=agent.pane_id):
                    drift.bump("lost")
                server.lost_at[agent.uuid] = time.monotonic()
                _confirm_later(server, server.lost_at[agent.uuid])
        elif agent.status == "lost":
            # "one following poll", at least LOST_CONFIRM later: a multiplexer's
            # pane_exited hint (paced by its event stream) has time to arrive
            first_seen = server.lost_at.setdefault(agent.uuid, time.monotonic())
            if not exited and time.monotonic() - first_seen < LOST_CONFIRM:
                _confirm_later(server, first_seen)
                return
            server.lost_at.pop(agent.uuid, None)
            if exited or not resume.auto_resume(server, agent):
                lifecycle.transition(agent, "ended", "exited" if exited else "lost")
    if agent.status == "ended":  # its pane is gone: what it started that outlived it
        procs.stop(server, agent, procs.collect(server, agent, None))
        ceilings_step.release(agent.uuid)
    server.notify()


def _confirm_later(server: ServerContext, first_seen: float) -> None:
    """A snapshot once LOST_CONFIRM has passed since the loss was first seen."""
    monitor = getattr(server, "monitor", None)
    if monitor is not None:
        at = time.time() + max(0.0, first_seen + LOST_CONFIRM - time.monotonic()) + 0.01
        monitor.timers.arm_soonest(at, "", "lost")


def closing_why(agent: Agent) -> str | None:
    """The ``why`` of a ``pane.close_requested`` of the row's pane that no
    ``pane.close_applied`` followed, or None: an end whose close is under way."""
    last = (
        Event.select(Event.kind, Event.data)
        .where(
            (Event.agent == agent.uuid)
            & Event.kind.in_(("pane.close_requested", "pane.close_applied"))
        )
        .order_by(Event.seq.desc())
        .first()
    )
    if last is None or last.kind != "pane.close_requested":
        return None
    data = json.loads(last.data or "{}")
    return (data.get("why") or "") if data.get("pane_id") == agent.pane_id else None
