"""What a sandboxed agent may ask through its own socket (orcr_core/server/agent_sockets).

It may start agents (each no wider than itself: :mod:`orcr_core.sandbox.inherit`)
and look after the ones it started, at any depth: get, read, send, keys, kill,
resume, list (only those). It may report its own provider session. Nothing else:
not another agent (typing into an unsandboxed one would be a way out), not loops,
worktrees, the config, the event stream or the server (refused ``forbidden``,
naming what it may do).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orcr_core.protocol import ProtocolError

if TYPE_CHECKING:
    from orcr_core.server.context import ServerContext

#: the methods served to a sandboxed caller
SERVED = (
    "hello",
    "agent.run",
    "agent.get",
    "agent.read",
    "agent.send",
    "agent.keys",
    "agent.kill",
    "agent.resume",
    "agent.list",
    "agent.report_session",
)
_TARGETED = ("agent.get", "agent.read", "agent.send", "agent.keys", "agent.kill", "agent.resume")


def _policy(server: ServerContext, row) -> dict:
    from orcr_core.agents.launch import launch_info

    try:
        return launch_info(server, row).get("sandbox") or {}
    except (OSError, ValueError):
        return {}


def parent_policy(server: ServerContext, caller: str) -> dict:
    """The caller's policy with its ``uuid``, ``path`` and ``provider``: a child's
    sandbox is narrowed from it. ``forbidden`` when the caller ended or has none."""
    from orcr_core.store.models import Agent

    row = Agent.get_or_none(Agent.uuid == caller)
    policy = _policy(server, row) if row is not None else {}
    if row is None or row.status == "ended" or not policy:
        raise ProtocolError("forbidden", "this socket's agent has ended; it serves nobody")
    return dict(policy, uuid=row.uuid, path=row.path, provider=row.provider)


def descends(server: ServerContext, row, caller: str) -> bool:
    """Whether ``row`` is the caller or an agent started from inside it (at any depth)."""
    return row.uuid == caller or caller in (_policy(server, row).get("lineage") or [])


def guard(server: ServerContext, caller: str, name: str, params: dict) -> None:
    """Refuse what a sandboxed caller may not do (module docstring)."""
    from orcr_core.server.targets import resolve, resolve_many

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
        rows = resolve_many(target) if name == "agent.kill" else [resolve(target)]
        for row in rows:
            if not descends(server, row, caller):
                raise ProtocolError(
                    "forbidden",
                    f"{row.path} was not started from inside this sandboxed agent; "
                    "it may act only on the agents it started",
                )


def filter_list(server: ServerContext, caller: str, result: dict) -> dict:
    """``agent.list`` for a sandboxed caller: only itself and the agents it started."""
    from orcr_core.store.models import Agent

    keep = []
    for agent in result.get("agents", []):
        row = Agent.get_or_none(Agent.uuid == agent.get("uuid"))
        if row is not None and descends(server, row, caller):
            keep.append(agent)
    return dict(result, agents=keep)
