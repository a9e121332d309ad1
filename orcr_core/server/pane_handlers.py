"""Talking to a live agent: type a prompt or keys into its pane, read its last
answer or screen, record the session its process reports, attach to its pane.

Registered in the route table, :mod:`orcr_core.server.routes`."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from orcr_core.agents import lifecycle, queue, sessions
from orcr_core.agents.launch import pane_of
from orcr_core.contracts import AgentStatus, AttachCommand, Focus, SessionPointer
from orcr_core.protocol import ProtocolError
from orcr_core.server.routes import route
from orcr_core.server.shapes import agent_dict, param
from orcr_core.server.targets import resolve
from orcr_core.store.models import Agent, db

if TYPE_CHECKING:
    from orcr_core.server.context import ServerContext

log = logging.getLogger("orcr.handlers")


@route("agent.send")
def agent_send(server: ServerContext, conn, rid, params):
    from orcr_core.agents import delivery

    agent = resolve(param(params, "target", str))
    prompt = param(params, "prompt", str)
    timeout = params.get("timeout")
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0
    ):
        raise ProtocolError("invalid_params", "timeout must be a number of seconds > 0")
    try:
        prompt = queue.clean_prompt(prompt)
    except queue.AdmissionError as exc:
        raise ProtocolError(exc.code, str(exc)) from None
    if agent.status != AgentStatus.IDLE or not delivery.send_prompt(server, agent, prompt, timeout):
        from orcr_core.agents.resume import send_refusal

        raise ProtocolError("not_idle", send_refusal(Agent.get_by_id(agent.id)))
    return {"agent": agent_dict(Agent.get_by_id(agent.id))}


@route("agent.keys")
def agent_keys(server: ServerContext, conn, rid, params):
    """``agent send --key``: press keys in a live agent's pane (answer a dialog).

    No turn starts and nothing is recorded as a prompt: a blocked agent's
    pipeline sees the answered dialog on its next screen check and types its
    first prompt then.
    """
    from orcr_core.contracts import DriverError

    agent = resolve(param(params, "target", str))
    keys = params.get("keys")
    if (
        not isinstance(keys, list)
        or not keys
        or len(keys) > 64
        or not all(isinstance(k, str) and k for k in keys)
    ):
        raise ProtocolError("invalid_params", "keys must be a list of 1-64 key names")
    pane = pane_of(agent)
    if (
        pane is None
        or agent.status not in (AgentStatus.STARTING, AgentStatus.WORKING, AgentStatus.IDLE)
        or server.driver is None
    ):
        raise ProtocolError(
            "not_attachable", f"agent {agent.path} has no live pane ({agent.status})"
        )
    try:
        server.driver.send_keys(pane, list(keys))
    except DriverError as exc:
        code = "invalid_params" if exc.code == "unknown_key" else "driver_error"
        raise ProtocolError(code, str(exc)) from None
    if agent.blocked_reason:
        server.dialog_checked.pop(agent.uuid, None)  # re-check its screen at once
        server.monitor.poke()
    return {"path": agent.path, "uuid": agent.uuid, "keys": list(keys)}


@route("agent.read")
def agent_read(server: ServerContext, conn, rid, params):
    from orcr_core.agents import transcripts

    agent = resolve(param(params, "target", str))
    last = param(params, "last", bool, required=False, default=False)
    provider = server.registry.providers.get(agent.provider)
    screen_only = provider is not None and not provider.has_transcript  # its turns: the screen
    if agent.status in (AgentStatus.QUEUED, AgentStatus.STARTING) and not (
        last or (screen_only and agent.pane_id)
    ):
        raise ProtocolError(
            "turn_running",
            f"agent {agent.path} is {agent.status}: its first turn has not started yet, so "
            f"there is no answer; orcr agent wait {agent.path} waits for it",
        )
    if agent.status == AgentStatus.WORKING and not last and not screen_only:
        raise ProtocolError(
            "turn_running",
            f"agent {agent.path} is working: its turn is still running, so there is no answer "
            f"yet; orcr agent wait {agent.path} first, or --last for the previous answer",
        )
    state = transcripts.read_transcript(server, agent)
    result = {
        "path": agent.path,
        "uuid": agent.uuid,
        "status": agent.status,
        "text": None,
        "error": None,
    }
    if state is not None:
        done = [t for t in state.turns if t.status != "open"]
        result.update(
            text=state.final_text,
            turns=len(state.turns),
            state=state.state,
            turn=len(done) or None,
            turn_status=done[-1].status if done else None,
            error=done[-1].error if done else None,
        )
    elif params.get("screen", True) and agent.pane_id and server.driver is not None:
        result["screen"] = server.driver.read(pane_of(agent))
    return result


@route("agent.report_session")
def agent_report_session(server: ServerContext, conn, rid, params):
    """An agent's own process reports its provider session (Codex's ``notify``).

    Only the process orcr started can: it must show the launch token that lives
    in its environment. A session replaces the recorded one only when its
    transcript received the agent's prompt (:mod:`orcr_core.agents.sessions`).
    """
    agent = Agent.get_or_none(Agent.uuid == param(params, "uuid", str))
    if agent is None or agent.launch_token != param(params, "launch_token", str):
        raise ProtocolError("forbidden", "unknown agent or wrong launch token")
    source, kind = param(params, "source", str), param(params, "kind", str)
    value = param(params, "value", str)
    if kind not in ("id", "path") or not value or len(value) > 512:
        raise ProtocolError("invalid_params", "kind is id or path; value 1-512 characters")
    pointer = SessionPointer(source, kind, value)
    with db.atomic("IMMEDIATE"):
        # decided on the row as it is inside the write transaction (compare-and-set):
        # a report that read the row before another report (or the monitor) recorded
        # a session must not overwrite it with a decision made on the old row
        agent = Agent.get_by_id(agent.id)
        if agent.status == AgentStatus.ENDED or agent.agent_session_value == value:
            return {"recorded": False}
        # a second session reported (Codex may name a thread with no rollout): follow
        # the one whose transcript received the prompt, whatever the order; one whose
        # transcript exists is never replaced by one whose does not (agents.sessions)
        if not sessions.replaces(server, agent, pointer):
            return {"recorded": False}
        fields = dict(
            agent_session_source=source, agent_session_kind=kind, agent_session_value=value
        )
        if agent.status == AgentStatus.STARTING:
            fields["last_progress_at"] = time.time()  # a progress marker
        lifecycle.update(agent, "agent.session", **fields)
        # the agent's own process named it: another agent's search took it by mistake
        sessions.release(agent, value)
    server.notify()
    return {"recorded": True}


@route("agent.attach")
def agent_attach(server: ServerContext, conn, rid, params):
    from orcr_core.agents import parking
    from orcr_core.contracts import DriverError

    agent = resolve(param(params, "target", str))
    drv = server.driver
    if agent.pane_id is None or drv is None or agent.status == AgentStatus.ENDED:
        raise ProtocolError(
            "not_attachable", f"agent {agent.path} has no live pane ({agent.status})"
        )
    try:
        agent = parking.unpark(server, agent, "attach")  # back in its workspace first
    except DriverError as exc:
        log.warning("agent %s: not un-parked for attach: %s", agent.path, exc)
        agent = Agent.get_by_id(agent.id)  # attach where it is
    pane = pane_of(agent)
    if isinstance(drv, Focus):
        drv.focus(pane)
    command = drv.attach_command(pane) if isinstance(drv, AttachCommand) else None
    hint = f"{agent.path} is pane {pane.pane_id} in {drv.name}"
    if command:
        hint += "; attach a terminal with: " + " ".join(command)
    return {"hint": hint, "command": command, "pane_id": pane.pane_id}
