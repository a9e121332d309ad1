"""Turns from the provider's transcript: working, idle, and what each turn spent.

Working and idle come from the provider's transcript, never the screen; the
multiplexer's agent state is used only for providers without a transcript. The
monitor (:mod:`orcr_core.agents.monitor`) calls :func:`follow` for every agent
it visits; the turn's end, its outcome and its usage commit in one transaction.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orcr_core.agents import asking, lifecycle, limit_wait, pipeline, sessions, stall, transcripts
from orcr_core.agents.transcripts import read_transcript
from orcr_core.common import clock
from orcr_core.contracts import ProviderError
from orcr_core.store import events, faults
from orcr_core.store.models import Agent, db
from orcr_core.usage import record as usage

if TYPE_CHECKING:
    from orcr_core.server.context import ServerContext


def follow(server: ServerContext, agent: Agent) -> None:
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
        # no session, or one with no transcript (Codex: notify reports completed
        # turns only, its title thread included): look for the one that got the prompt
        if sessions.discover(server, agent):
            state = read_transcript(server, agent)
        if state is None:
            return
    stall.check(server, agent, clock.time())  # growth clears it before the turn's end moves on
    if state.version:
        _check_version(server, agent, provider, state.version)  # once per version seen
    ended = agent.status == "working" and state.state == "idle" and len(state.turns) >= agent.turn
    last = state.turns[-1] if state.turns else None
    if ended and last is not None and last.error:
        if limit_wait.waits(server, agent, provider, last.error, clock.time()):
            return  # a usage limit its CLI waits out at its composer: not the end yet
    if ended:
        outcome = {"turn": agent.turn, "turn_status": last.status if last else None}
        if last is not None and last.error:
            outcome["turn_error"] = last.error
        _set(server, agent, "idle", turns_done=len(state.turns), ended=state.turns, **outcome)
        if last is not None and last.error:  # a usage limit holds the provider
            server.usage_limits.turn_error(server, agent, provider, last.error)
        monitor = getattr(server, "monitor", None)
        if monitor is not None:  # herdr's completion_seq as a second witness
            monitor.witness.turn_ended(agent.uuid)
            if monitor.witness.pending():
                monitor._classify()  # poll snapshots until herdr's witness shows
    elif (
        agent.status == "idle"
        and state.state in ("working", "blocked")
        and len(state.turns) > agent.turns_done
    ):
        _set(server, agent, "working", reason="turn started in the pane")
    elif agent.status == "working":  # quiet mid-turn: a question for a person?
        asking.check(server, agent, state, provider, clock.time())


def _check_version(server: ServerContext, agent: Agent, provider, version: str) -> None:
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


def _set(
    server: ServerContext, agent: Agent, to: str, turns_done: int | None = None, ended=(), **data
) -> None:
    done = None  # an --rm agent ended with its turn: its pane to close after the commit
    with db.atomic("IMMEDIATE"):
        current = Agent.get_by_id(agent.id)
        if current.status != agent.status:
            return
        first = current.turns_done
        if turns_done is not None:
            fields = {"turns_done": turns_done}
            if "turn_status" in data:  # the row says how the last turn ended
                fields.update(turn_status=data["turn_status"], turn_error=data.get("turn_error"))
            lifecycle.update(current, None, **fields)
        if turns_done is not None and turns_done > first:  # what those turns spent (top)
            data["tokens"] = usage.tokens(ended[first:turns_done])
        if to == "idle" and current.rm:  # agent run --rm: the turn's end is the agent's
            lifecycle.transition(current, "ended", "done", **data)
            done = current
        else:
            lifecycle.transition(current, to, **data)
        if turns_done is not None and turns_done > first:
            usage.record(current, ended[first:turns_done], first)  # the same commit
    if turns_done is not None and turns_done > first:
        faults.point("after_turn_usage")  # both committed
    server.notify()
    if done is not None:
        faults.point("after_rm_end")  # the turn's end and the agent's, one commit
        _close_done(server, done)


def _close_done(server: ServerContext, agent: Agent) -> None:
    """The pane of an agent that ended ``done``: closed after the row's commit (the slot
    is free already). A crash before it leaves a late pane of an ended agent, which the
    reconciliation pass closes (agents/reconcile.py, ``done`` is one of orcr's ends)."""
    from orcr_core.agents.launch import pane_of
    from orcr_core.contracts import DriverError

    try:
        pipeline.close_pane(server, agent, pane_of(agent), "done")
    except DriverError:
        pass  # reconciliation closes it when the multiplexer answers
