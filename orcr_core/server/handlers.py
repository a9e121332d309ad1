"""Socket method handlers. Each returns a JSON-able result or raises ProtocolError."""

from __future__ import annotations

import logging
import os
import time
from typing import TYPE_CHECKING

from peewee import PeeweeException

from orcr_core import __version__, paths
from orcr_core.agents import cli_check, queue
from orcr_core.contracts import AgentStatus
from orcr_core.loops.runs import admission_refusal
from orcr_core.protocol import ProtocolError
from orcr_core.server import (  # noqa: F401 (each *_handlers registers its routes at import)
    loop_handlers,
    notify_handlers,
    pane_handlers,
    sandboxed,
    stream_handlers,
    usage_handlers,
    worktree_handlers,
)
from orcr_core.server.pane_handlers import agent_report_session  # noqa: F401
from orcr_core.server.routes import ROUTES, route
from orcr_core.server.shapes import agent_dict, iso, param, session_dict
from orcr_core.server.targets import resolve, resolve_many
from orcr_core.store.db import SCHEMA_VERSION
from orcr_core.store.models import Agent
from orcr_core.usage import budgets
from orcr_core.usage import record as usage

if TYPE_CHECKING:
    from orcr_core.server.context import ServerContext

log = logging.getLogger("orcr.handlers")
#: every socket method, the one table :func:`dispatch` serves (``routes.ROUTES``)
HANDLERS = ROUTES


def dispatch(server: ServerContext, conn, rid, name, params):
    fn = HANDLERS.get(name)
    if fn is None:
        raise ProtocolError("unknown_method", f"unknown method {name!r}; known: {sorted(HANDLERS)}")
    caller = getattr(conn, "caller", None)
    if caller is None:
        return fn(server, conn, rid, params)
    sandboxed.guard(server, caller, name, params)  # a sandboxed agent's own socket
    result = fn(server, conn, rid, params)
    return sandboxed.filter_list(server, caller, result) if name == "agent.list" else result


@route("hello")
def hello(server: ServerContext, conn, rid, params):
    if params.get("protocol") != conn.hello_protocol:
        raise ProtocolError("unsupported_version", "the protocol was negotiated already")
    return {
        "protocol": params["protocol"],
        "server_version": __version__,
        "pid": os.getpid(),
    }


def admitted(server: ServerContext) -> None:
    """After an admission's commit: wake the watchers, and the queue worker only if a
    slot is free (a full machine promotes nothing; a burst of admissions at the cap
    woke it once per group for nothing: bench/admission.py). A count that fails wakes
    it (its own pass says what holds): the admission has committed, its reply stands."""
    try:
        free = sum(queue.live_counts().values()) < server.config.cap()
    except PeeweeException:
        free = True
    server.notify(queue=free)


@route("agent.run")
def agent_run(server: ServerContext, conn, rid, params):
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
        allow_net=_str_list(params, "allow_net"),
        # through a sandboxed agent's own socket: its child, no wider than itself
        parent=sandboxed.parent_policy(server, conn.caller) if conn.caller else None,
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
            sync=conn.deferred is None,  # a group syncs its new files at once, before its commit
        )
    except queue.AdmissionError as exc:
        raise ProtocolError(exc.code, str(exc)) from None
    except paths.PathError as exc:
        raise ProtocolError("invalid_path", str(exc)) from None
    if conn.deferred is None:  # in a group the listener notifies after the commit
        admitted(server)
    out = {k: agent[k] for k in ("path", "uuid", "status", "queue_seq")}
    warning = cli_check.missing_cli(
        spec.provider,
        server.registry.providers.get(spec.provider),
        server.config.provider_options(spec.provider),
    )
    if warning and not spec.argv:  # admitted all the same: the CLI may come before its start
        out["warning"] = warning
    return out


def _str_list(params: dict, key: str) -> list[str] | None:
    value = params.get(key)
    if value is not None and (
        not isinstance(value, list) or not all(isinstance(v, str) for v in value)
    ):
        raise ProtocolError("invalid_params", f"{key} must be a list of strings")
    return value


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
            .where(Agent.status == AgentStatus.ENDED)
            .order_by(Agent.ended_at.desc(), Agent.id.desc())
            .limit(ended)
        )
    q = Agent.select().order_by(Agent.id)
    if not params.get("all"):
        q = q.where(Agent.status != AgentStatus.ENDED)
    prefix = params.get("prefix")
    if prefix:
        prefix = prefix.rstrip("/")
        q = q.where((Agent.path == prefix) | Agent.path.startswith(prefix + "/"))
    return list(q)


@route("agent.list")
def agent_list(server: ServerContext, conn, rid, params):
    agents = usage.attach([agent_dict(a) for a in _list(params)])
    _mark_held(server, agents)
    return {"agents": agents}


def _mark_held(server: ServerContext, agents: list[dict]) -> None:
    """``held`` on the queued agents: why the queue is not moving (memory, the
    multiplexer), else a spent token budget of their scope; and, whatever else
    holds the queue, a provider no plugin registers (uninstalled since admission);
    else a full cap (``cap echo 3/3``, ``cap global 4/4``). ``waiting`` on a working
    agent whose CLI waits out a usage limit, which holds its provider's queued rows
    (``usage limit claude until 19:00``, orcr_core/usage_limits)."""
    for a in agents:
        a["waiting"] = server.usage_limits.waiting(a["uuid"]) if a["status"] == "working" else None
    queued = [a for a in agents if a["status"] == "queued"]
    if not queued:
        return
    limited = server.usage_limits.held(server)
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


@route("unmanaged.list")
def unmanaged_list(server: ServerContext, conn, rid, params):
    """Agents herdr detects in the user's other sessions (listed, never acted on)."""
    from orcr_core.agents import unmanaged

    everything = param(params, "all", bool, required=False, default=False)
    return {"unmanaged": [unmanaged_dict(u) for u in unmanaged.rows(all=everything)]}


@route("agent.get")
def agent_get(server: ServerContext, conn, rid, params):
    row = resolve(param(params, "target", str))
    agent = usage.attach([agent_dict(row)], per_turn=True)[0]
    _mark_held(server, [agent])
    agent["sandbox"] = _sandbox_of(server, row)
    return {"agent": agent}


def _sandbox_of(server: ServerContext, row: Agent) -> dict | None:
    """Its sandbox as launch.json records it (None: unsandboxed, or its data is gone)."""
    from orcr_core.agents.launch import launch_info
    from orcr_core.sandbox.policy import public

    try:
        return public(launch_info(server, row).get("sandbox"))
    except (OSError, ValueError):
        return None


@route("agent.resume")
def agent_resume(server: ServerContext, conn, rid, params):
    from orcr_core.agents import resume

    try:
        agent = resume.resume(server, resolve(param(params, "target", str)))
    except resume.ResumeError as exc:
        raise ProtocolError(exc.code, str(exc)) from None
    return {"agent": agent_dict(agent)}


@route("agent.kill")
def agent_kill(server: ServerContext, conn, rid, params):
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


@route("server.status")
def server_status(server: ServerContext, conn, rid, params):
    return server.status()


@route("server.stop")
def server_stop(server: ServerContext, conn, rid, params):
    return {"stopping": True, "pid": os.getpid()}


@route("config.reload")
def config_reload(server: ServerContext, conn, rid, params):
    try:
        changed = server.reload_config()
    except Exception as exc:
        raise ProtocolError("invalid_config", str(exc)) from None
    return {"reloaded": True, "changed": changed}


@route("store.info")
def store_info(server: ServerContext, conn, rid, params):
    return {"schema_version": SCHEMA_VERSION, "path": str(server.store_path), "now": time.time()}
