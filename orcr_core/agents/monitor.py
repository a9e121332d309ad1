"""The monitor tick: turns from transcripts, panes from one snapshot, timers.

Working and idle come from the provider's transcript, never the screen; the
multiplexer's agent state is used only for providers without a transcript.
Every clock (stuck-start guard, turn timeout, GC) is computed from persisted
timestamps, so a server restart neither resets nor skips one.
"""

from __future__ import annotations

import logging
import time

from orcr_core import events
from orcr_core.agents import lifecycle, pipeline, rematch, transcripts
from orcr_core.agents.launch import owned, pane_of
from orcr_core.agents.transcripts import read_transcript
from orcr_core.contracts import DriverError, ProviderError
from orcr_core.store.models import Agent, db

log = logging.getLogger("orcr.monitor")

LOST_CONFIRM = 1.0  # seconds: the least time between lost and ended (lost)


def tick(server) -> None:
    now = time.time()
    active = list(Agent.select().where(Agent.status.in_(("starting", "working", "idle", "lost"))))
    if active:
        _panes(server, active)
    for agent in active:
        try:
            _agent(server, agent, now)
        except (DriverError, ProviderError) as exc:
            log.warning("agent %s: %s", agent.path, exc)
    transcripts.forget_except(server, {a.uuid for a in active})


def _panes(server, active: list[Agent]) -> None:
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
        if rematch.replaced(agent, pane):  # a shell restored in its place: not the agent
            if not agent.cancel_requested:
                rematch.lose(server, agent, pane)
            continue
        with db.atomic("IMMEDIATE"):
            current = Agent.get_by_id(agent.id)
            if current.status == "ended":
                continue
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
                lifecycle.transition(current, back, repair=True)
                server.counters["repaired"] += 1
            rematch.record(current, pane)
            if not current.agent_session_value:
                _capture_session(current, pane)
            agent.__data__.update(current.__data__)
        if (
            agent.provider in server.registry.providers
            and not server.registry.providers[agent.provider].has_transcript
        ):
            agent._mux_status = pane.agent_status


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


def _vanished(server, agent: Agent) -> None:
    with db.atomic("IMMEDIATE"):
        agent = Agent.get_by_id(agent.id)
        if agent.cancel_requested:
            return  # the kill that closed the pane ends the row itself
        exited = agent.pane_id in server.exited_panes  # the multiplexer saw the process end
        if agent.status in ("working", "idle"):
            if exited:
                lifecycle.transition(agent, "ended", "exited", pane_id=agent.pane_id)
            else:
                lifecycle.transition(agent, "lost", pane_id=agent.pane_id)
                server.counters["lost"] += 1
                server.lost_at[agent.uuid] = time.monotonic()
        elif agent.status == "lost":
            # "one following poll", at least LOST_CONFIRM later: a multiplexer's
            # pane_exited hint (paced by its event stream) has time to arrive
            first_seen = server.lost_at.setdefault(agent.uuid, time.monotonic())
            if not exited and time.monotonic() - first_seen < LOST_CONFIRM:
                return
            server.lost_at.pop(agent.uuid, None)
            lifecycle.transition(agent, "ended", "exited" if exited else "lost")
    server.notify()


def _agent(server, agent: Agent, now: float) -> None:
    cfg = server.config
    if agent.status == "starting":
        guard = cfg.duration("timings.max_starting")
        if agent.cancel_requested and not server.pipeline_active(agent.uuid):
            pipeline.finish_cancel(server, agent)
        elif (agent.last_progress_at or agent.started_at or now) + guard < now:
            _guard_expired(server, agent, guard)
        elif not server.pipeline_active(agent.uuid) and now - (agent.last_progress_at or 0) > 1.0:
            server.start_pipeline(agent.uuid, pipeline.run)  # resume after a retryable failure
        return
    if agent.status not in ("working", "idle"):
        return
    if agent.cancel_requested:
        pipeline.end(server, agent, "killed")
        return
    if agent.status == "working" and agent.timeout and agent.turn_started_at:
        if agent.turn_started_at + agent.timeout < now:
            pipeline.end(
                server, agent, "timeout", error=f"turn ran past its timeout of {agent.timeout:g}s"
            )
            return
    if agent.status == "idle" and agent.idle_since:
        if agent.idle_since + cfg.duration("timings.gc_after") < now:
            pipeline.end(server, agent, "gc")
            return
    _turns(server, agent)


def _guard_expired(server, agent: Agent, guard: float) -> None:
    msg = f"stuck-start guard: no progress for {guard:g}s (timings.max_starting)"
    with db.atomic("IMMEDIATE"):
        agent = Agent.get_by_id(agent.id)
        if agent.status != "starting":
            return
        if agent.cancel_requested:
            # a kill was requested while the multiplexer call hung: the kill decides
            lifecycle.transition(agent, "ended", "canceled", reason=msg)
        else:
            lifecycle.transition(agent, "ended", "failed", error=msg)
    server.notify()
    try:
        pipeline.close_pane(server, agent, pane_of(agent), "stuck-start guard")
    except DriverError:
        pass  # reconciliation closes the late pane by label


def _turns(server, agent: Agent) -> None:
    provider = server.registry.providers.get(agent.provider)
    if provider is None:
        return
    if not provider.has_transcript:
        status = getattr(agent, "_mux_status", None)
        if status in ("idle", "done") and agent.status == "working":
            _set(server, agent, "idle")
        elif status == "working" and agent.status == "idle":
            _set(server, agent, "working")
        return
    state = read_transcript(server, agent)
    if state is None:
        return
    if state.version:
        _check_version(server, agent, provider, state.version)  # once per version seen
    if agent.status == "working" and state.state == "idle" and len(state.turns) >= agent.turn:
        last = state.turns[-1] if state.turns else None
        _set(
            server,
            agent,
            "idle",
            turn_status=last.status if last else None,
            turns_done=len(state.turns),
        )
    elif (
        agent.status == "idle"
        and state.state in ("working", "blocked")
        and len(state.turns) > agent.turns_done
    ):
        _set(server, agent, "working", reason="turn started in the pane")


def _check_version(server, agent: Agent, provider, version: str) -> None:
    if not transcripts.version_changed(server, agent.uuid, version):
        return
    try:
        warning = provider.check_version(version, server.config.provider_options(agent.provider))
    except ProviderError as exc:
        pipeline.end(server, agent, "failed", error=str(exc))
        return
    if warning:
        with db.atomic("IMMEDIATE"):
            events.emit("agent.warning", agent.uuid, path=agent.path, message=warning)


def _set(server, agent: Agent, to: str, turns_done: int | None = None, **data) -> None:
    with db.atomic("IMMEDIATE"):
        current = Agent.get_by_id(agent.id)
        if current.status != agent.status:
            return
        if turns_done is not None:
            lifecycle.update(current, None, turns_done=turns_done)
        lifecycle.transition(current, to, **data)
    server.notify()
