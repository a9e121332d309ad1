"""What a sandboxed agent may ask through its own socket (orcr_core/server/agent_sockets).

It may start agents (each no wider than itself: :mod:`orcr_core.sandbox.inherit`)
and look after the ones it started, at any depth: get, read, send, keys, kill,
resume, list, and watch them (``watch.open``, ``events.subscribe``: what ``agent
wait`` and the SDK's ``watch`` ride), only those: a list or a snapshot keeps them, a
stream carries only their events. It may report its own provider session. Nothing
else: not another agent (typing into an unsandboxed one would be a way out), not
loops, worktrees, the config, the fleet's own events or the server (refused
``forbidden``, naming what it may do). docs/decisions.md says why this scope.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orcr_core.protocol import ProtocolError

if TYPE_CHECKING:
    from orcr_core.server.context import ServerContext

#: the agent methods that name a ``target``: a sandboxed caller only its own descendants
_AGENT_TARGETED = (
    "agent.get",
    "agent.read",
    "agent.send",
    "agent.keys",
    "agent.kill",
    "agent.resume",
)
#: the methods served to a sandboxed caller
SERVED = (
    "hello",
    "agent.run",
    *_AGENT_TARGETED,
    "agent.list",
    "agent.report_session",
    "watch.open",
    "events.subscribe",
)
_TARGETED = (*_AGENT_TARGETED, "watch.open")


def _policy(server: ServerContext, row) -> dict:
    from orcr_core.agents.launch import launch_info

    try:
        return launch_info(server, row).get("sandbox") or {}
    except (OSError, ValueError):
        return {}


def _row(uuid: str | None):
    from orcr_core.store.models import Agent

    return Agent.get_or_none(Agent.uuid == uuid) if uuid else None


def parent_policy(server: ServerContext, caller: str) -> dict:
    """The caller's policy with its ``uuid``, ``path`` and ``provider``: a child's
    sandbox is narrowed from it. ``forbidden`` when the caller ended or has none."""
    row = _row(caller)
    policy = _policy(server, row) if row is not None else {}
    if row is None or row.status == "ended" or not policy:
        raise ProtocolError("forbidden", "this socket's agent has ended; it serves nobody")
    return dict(policy, uuid=row.uuid, path=row.path, provider=row.provider)


def descends(server: ServerContext, row, caller: str) -> bool:
    """Whether ``row`` is the caller or an agent started from inside it (at any depth)."""
    return row.uuid == caller or caller in (_policy(server, row).get("lineage") or [])


def guard(server: ServerContext, caller: str, name: str, params: dict) -> None:
    """Refuse what a sandboxed caller may not do (module docstring)."""
    from orcr_core.server import targets

    parent_policy(server, caller)  # an ended agent's socket serves nothing
    if name not in SERVED:
        raise ProtocolError(
            "forbidden",
            f"{name} is not served to a sandboxed agent; it may use "
            f"{', '.join(m for m in SERVED if m != 'hello')} (on the agents it started)",
        )
    if name == "agent.report_session" and params.get("uuid") != caller:
        raise ProtocolError("forbidden", "a sandboxed agent reports its own session only")
    if name in _TARGETED and isinstance(params.get("target"), str):
        target = params["target"]
        rows = targets.resolve_many(target) if name == "agent.kill" else [targets.resolve(target)]
        for row in rows:
            if not descends(server, row, caller):
                raise ProtocolError(
                    "forbidden",
                    f"{row.path} was not started from inside this sandboxed agent; "
                    "it may act only on the agents it started",
                )


def filter_rows(server: ServerContext, caller: str, agents: list[dict]) -> list[dict]:
    """The agents (as the socket shows them, by ``uuid``) the caller may see."""
    see = visible_events(server, caller)
    return [a for a in agents if see({"agent": a.get("uuid")})]


def filter_list(server: ServerContext, caller: str, result: dict) -> dict:
    """``agent.list`` for a sandboxed caller: only itself and the agents it started."""
    return dict(result, agents=filter_rows(server, caller, result.get("agents", [])))


def visible_events(server: ServerContext, caller: str):
    """A predicate: is this event (or row, by its ``agent``) the caller's to see? Its
    subtree's; not another agent's, nor one with no agent (the server's, a loop's).
    Each agent is looked up once: its lineage is fixed at its admission."""
    known: dict[str, bool] = {}

    def see(ev: dict) -> bool:
        uuid = ev.get("agent")
        if not uuid:
            return False
        if uuid not in known:
            row = _row(uuid)
            known[uuid] = row is not None and descends(server, row, caller)
        return known[uuid]

    return see


def last_seen_seq(server: ServerContext, caller: str) -> int:
    """The seq of the last event the caller may see: ``events.subscribe``'s
    ``last_seq`` for it, where ``orcr events`` stops listing. Its subtree was admitted
    after it (a child is admitted while its parent runs), so only those rows are
    looked at."""
    from peewee import fn

    from orcr_core.store.models import Agent, Event

    me = _row(caller)
    if me is None:
        return 0
    see = visible_events(server, caller)
    mine = [
        a.uuid for a in Agent.select(Agent.uuid).where(Agent.id >= me.id) if see({"agent": a.uuid})
    ]
    return Event.select(fn.MAX(Event.seq)).where(Event.agent.in_(mine)).scalar() or 0
