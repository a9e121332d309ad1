"""Socket method handlers. Each returns a JSON-able result or raises ProtocolError."""

from __future__ import annotations

import logging
import os
import time

from orcr_core import __version__, paths
from orcr_core.agents import cli_check, lifecycle, queue, sessions
from orcr_core.agents.launch import pane_of
from orcr_core.contracts import SessionPointer
from orcr_core.loops.runs import admission_refusal
from orcr_core.protocol import ProtocolError
from orcr_core.server.loop_handlers import LOOP_HANDLERS
from orcr_core.server.notify_handlers import NOTIFY_HANDLERS
from orcr_core.server.shapes import agent_dict, iso, param, session_dict
from orcr_core.server.stream_handlers import STREAM_HANDLERS
from orcr_core.server.usage_handlers import USAGE_HANDLERS
from orcr_core.server.worktree_handlers import WORKTREE_HANDLERS
from orcr_core.store.db import SCHEMA_VERSION
from orcr_core.store.models import Agent, db
from orcr_core.usage import budgets
from orcr_core.usage import record as usage

log = logging.getLogger("orcr.handlers")
HANDLERS = dict(
    LOOP_HANDLERS, **NOTIFY_HANDLERS, **WORKTREE_HANDLERS, **USAGE_HANDLERS, **STREAM_HANDLERS
)


def method(name):
    def deco(fn):
        HANDLERS[name] = fn
        return fn

    return deco


def dispatch(server, conn, rid, name, params):
    fn = HANDLERS.get(name)
    if fn is None:
        raise ProtocolError("unknown_method", f"unknown method {name!r}; known: {sorted(HANDLERS)}")
    return fn(server, conn, rid, params)


def resolve(target: str) -> Agent:
    """An agent by uuid, or by path: the active row first, else the newest ended one.
    A leading ``/`` (a path named from the top inside a scope) is dropped."""
    target = target.lstrip("/")
    row = Agent.get_or_none(Agent.uuid == target)
    if row is None:
        row = (
            Agent.select()
            .where(Agent.path == target)
            .order_by((Agent.status == "ended").asc(), Agent.id.desc())
            .first()
        )
    if row is None:
        raise ProtocolError(
            "not_found", f"no agent {target!r} (give a path or a uuid; orcr agent ls --all)"
        )
    return row


def resolve_many(target: str) -> list[Agent]:
    target = target.lstrip("/")
    if paths.is_glob(target):
        rows = [
            a
            for a in Agent.select().where(Agent.status != "ended")
            if paths.glob_match(target, a.path)
        ]
        return rows
    return [resolve(target)]


@method("hello")
def hello(server, conn, rid, params):
    if params.get("protocol") != conn.hello_protocol:
        raise ProtocolError("unsupported_version", "the protocol was negotiated already")
    return {
        "protocol": params["protocol"],
        "server_version": __version__,
        "pid": os.getpid(),
    }


@method("agent.run")
def agent_run(server, conn, rid, params):
    timeout = params.get("timeout")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int | float)):
        raise ProtocolError("invalid_params", "timeout must be a number of seconds")
    spec = queue.RunSpec(
        provider=param(params, "provider", str, required=False)
        or server.config.get("agent.provider", "claude"),
        cwd=param(params, "cwd", str),
        prompt=param(params, "prompt", str, required=False),
        path=param(params, "path", str, required=False),
        name=param(params, "name", str, required=False),
        scope=param(params, "scope", str, required=False),
        timeout=timeout,
        argv=param(params, "argv", list, required=False),
        worktree=param(params, "worktree", bool, required=False, default=False),
        branch=param(params, "branch", str, required=False),
        base=param(params, "base", str, required=False),
        model=param(params, "model", str, required=False),
        args=param(params, "args", list, required=False),
        # --rm: end it (done) with its first turn; unset: the config's [agent] rm
        rm=param(params, "rm", bool, required=False, default=server.config.get("agent.rm", False)),
        gc_after=params.get("gc_after"),
        sandbox=param(params, "sandbox", bool, required=False),
        limits=params.get("limits"),  # this run's ceilings (orcr_core/ceilings)
    )
    try:
        agent = queue.admit(
            spec,
            server.registry.providers,
            server.agents_dir,
            server.config.provider_options(spec.provider),
            check=admission_refusal,
            config=server.config,
            sync_dir=conn.deferred is None,  # a group syncs agents/ once, before its commit
        )
    except queue.AdmissionError as exc:
        raise ProtocolError(exc.code, str(exc)) from None
    except paths.PathError as exc:
        raise ProtocolError("invalid_path", str(exc)) from None
    if conn.deferred is None:  # in a group the listener notifies after the commit
        # wake the queue worker only if a slot is free: a full machine promotes nothing
        server.notify(queue=sum(queue.live_counts().values()) < server.config.cap())
    out = {k: agent[k] for k in ("path", "uuid", "status", "queue_seq")}
    warning = cli_check.missing_cli(
        spec.provider,
        server.registry.providers.get(spec.provider),
        server.config.provider_options(spec.provider),
    )
    if warning and not spec.argv:  # admitted all the same: the CLI may come before its start
        out["warning"] = warning
    return out


#: the most ``agent.list {ended: N}`` returns
MAX_ENDED_LIST = 1000


def _list(params) -> list[Agent]:
    ended = params.get("ended")
    if ended is not None:  # the N most recently ended agents, newest first
        if (
            isinstance(ended, bool)
            or not isinstance(ended, int)
            or not 1 <= ended <= MAX_ENDED_LIST
        ):
            raise ProtocolError("invalid_params", f"ended is a count from 1 to {MAX_ENDED_LIST}")
        return list(
            Agent.select()
            .where(Agent.status == "ended")
            .order_by(Agent.ended_at.desc(), Agent.id.desc())
            .limit(ended)
        )
    q = Agent.select().order_by(Agent.id)
    if not params.get("all"):
        q = q.where(Agent.status != "ended")
    prefix = params.get("prefix")
    if prefix:
        prefix = prefix.rstrip("/")
        q = q.where((Agent.path == prefix) | Agent.path.startswith(prefix + "/"))
    return list(q)


@method("agent.list")
def agent_list(server, conn, rid, params):
    agents = usage.attach([agent_dict(a) for a in _list(params)])
    _mark_held(server, agents)
    return {"agents": agents}


def _mark_held(server, agents: list[dict]) -> None:
    """``held`` on the queued agents: why the queue is not moving (memory, the
    multiplexer), else a spent token budget of their scope; and, whatever else
    holds the queue, a provider no plugin registers (uninstalled since admission);
    else a full cap (``cap echo 3/3``, ``cap global 4/4``). ``waiting`` on a working
    agent whose CLI waits out a usage limit, which holds its provider's queued rows
    (``usage limit claude until 19:00``, orcr_core/limits)."""
    for a in agents:
        a["waiting"] = server.limits.waiting(a["uuid"]) if a["status"] == "working" else None
    queued = [a for a in agents if a["status"] == "queued"]
    if not queued:
        return
    limited = server.limits.held(server)
    if server.held:
        for a in queued:
            a["held"] = server.held
    budgets.mark_held(server, queued)
    counts = None
    for a in queued:
        reason = queue.held_reason(a["provider"], server.registry.providers)
        if not reason and not a.get("held"):
            reason = limited.get(a["provider"])
        if reason:
            a["held"] = reason
        elif not a.get("held"):  # nothing else holds it: a full cap may
            counts = queue.live_counts() if counts is None else counts
            a["held"] = queue.cap_held(server.config, a["provider"], counts)


def unmanaged_dict(u) -> dict:
    return {
        "session": u.session,
        "terminal_id": u.terminal_id,
        "kind": u.kind,
        "status": u.status,
        "pane_id": u.pane_id,
        "workspace_id": u.workspace_id,
        "tab_id": u.tab_id,
        "cwd": u.cwd,
        "label": u.label,
        "name": u.name,
        "agent_session": session_dict(u),
        "discovered_at": iso(u.discovered_at),
        "updated_at": iso(u.updated_at),
        "ended_at": iso(u.ended_at),
    }


@method("unmanaged.list")
def unmanaged_list(server, conn, rid, params):
    """Agents herdr detects in the user's other sessions (listed, never acted on)."""
    from orcr_core.agents import unmanaged

    everything = param(params, "all", bool, required=False, default=False)
    return {"unmanaged": [unmanaged_dict(u) for u in unmanaged.rows(all=everything)]}


@method("agent.get")
def agent_get(server, conn, rid, params):
    row = resolve(param(params, "target", str))
    agent = usage.attach([agent_dict(row)], per_turn=True)[0]
    _mark_held(server, [agent])
    agent["sandbox"] = _sandbox_of(server, row)
    return {"agent": agent}


def _sandbox_of(server, row: Agent) -> dict | None:
    """Its sandbox as launch.json records it (None: unsandboxed, or its data is gone)."""
    from orcr_core.agents.launch import launch_info
    from orcr_core.sandbox.policy import public

    try:
        return public(launch_info(server, row).get("sandbox"))
    except (OSError, ValueError):
        return None


@method("agent.resume")
def agent_resume(server, conn, rid, params):
    from orcr_core.agents import resume

    try:
        agent = resume.resume(server, resolve(param(params, "target", str)))
    except resume.ResumeError as exc:
        raise ProtocolError(exc.code, str(exc)) from None
    return {"agent": agent_dict(agent)}


@method("agent.kill")
def agent_kill(server, conn, rid, params):
    from orcr_core.agents import pipeline

    target = param(params, "target", str)
    rows = resolve_many(target)
    if not rows and paths.is_glob(target):
        raise ProtocolError("not_found", f"no active agent matches {target!r}")
    if param(params, "dry_run", bool, required=False, default=False):
        return {"matches": [{"path": a.path, "uuid": a.uuid, "status": a.status} for a in rows]}
    results = []
    for agent in rows:
        results.append(
            {"path": agent.path, "uuid": agent.uuid, **pipeline.request_kill(server, agent)}
        )
    server.notify()
    return {"killed": results}


@method("agent.send")
def agent_send(server, conn, rid, params):
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
    if agent.status != "idle" or not delivery.send_prompt(server, agent, prompt, timeout):
        from orcr_core.agents.resume import send_refusal

        raise ProtocolError("not_idle", send_refusal(Agent.get_by_id(agent.id)))
    return {"agent": agent_dict(Agent.get_by_id(agent.id))}


@method("agent.keys")
def agent_keys(server, conn, rid, params):
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
    if pane is None or agent.status not in ("starting", "working", "idle") or server.driver is None:
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


@method("agent.read")
def agent_read(server, conn, rid, params):
    from orcr_core.agents import transcripts

    agent = resolve(param(params, "target", str))
    last = param(params, "last", bool, required=False, default=False)
    provider = server.registry.providers.get(agent.provider)
    screen_only = provider is not None and not provider.has_transcript  # its turns: the screen
    if agent.status in ("queued", "starting") and not (last or (screen_only and agent.pane_id)):
        raise ProtocolError(
            "turn_running",
            f"agent {agent.path} is {agent.status}: its first turn has not started yet, so "
            f"there is no answer; orcr agent wait {agent.path} waits for it",
        )
    if agent.status == "working" and not last and not screen_only:
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


@method("agent.report_session")
def agent_report_session(server, conn, rid, params):
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
        if agent.status == "ended" or agent.agent_session_value == value:
            return {"recorded": False}
        # a second session reported (Codex may name a thread with no rollout): follow
        # the one whose transcript received the prompt, whatever the order; one whose
        # transcript exists is never replaced by one whose does not (agents.sessions)
        if not sessions.replaces(server, agent, pointer):
            return {"recorded": False}
        fields = dict(
            agent_session_source=source, agent_session_kind=kind, agent_session_value=value
        )
        if agent.status == "starting":
            fields["last_progress_at"] = time.time()  # a progress marker
        lifecycle.update(agent, "agent.session", **fields)
        # the agent's own process named it: another agent's search took it by mistake
        sessions.release(agent, value)
    server.notify()
    return {"recorded": True}


@method("server.status")
def server_status(server, conn, rid, params):
    return server.status()


@method("server.stop")
def server_stop(server, conn, rid, params):
    return {"stopping": True, "pid": os.getpid()}


@method("config.reload")
def config_reload(server, conn, rid, params):
    try:
        changed = server.reload_config()
    except Exception as exc:
        raise ProtocolError("invalid_config", str(exc)) from None
    return {"reloaded": True, "changed": changed}


@method("store.info")
def store_info(server, conn, rid, params):
    return {"schema_version": SCHEMA_VERSION, "path": str(server.store_path), "now": time.time()}


@method("agent.attach")
def agent_attach(server, conn, rid, params):
    from orcr_core.agents import parking
    from orcr_core.contracts import DriverError

    agent = resolve(param(params, "target", str))
    drv = server.driver
    if agent.pane_id is None or drv is None or agent.status == "ended":
        raise ProtocolError(
            "not_attachable", f"agent {agent.path} has no live pane ({agent.status})"
        )
    try:
        agent = parking.unpark(server, agent, "attach")  # back in its workspace first
    except DriverError as exc:
        log.warning("agent %s: not un-parked for attach: %s", agent.path, exc)
        agent = Agent.get_by_id(agent.id)  # attach where it is
    pane = pane_of(agent)
    focus = getattr(drv, "focus", None)
    if focus is not None:
        focus(pane)
    hint_fn = getattr(drv, "attach_command", None)
    command = hint_fn(pane) if hint_fn else None
    hint = f"{agent.path} is pane {pane.pane_id} in {drv.name}"
    if command:
        hint += "; attach a terminal with: " + " ".join(command)
    return {"hint": hint, "command": command, "pane_id": pane.pane_id}
