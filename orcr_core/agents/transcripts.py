"""One incremental transcript reader per agent, shared by every caller."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from orcr_core.agents.launch import launch_spec
from orcr_core.contracts import SessionPointer, TurnState
from orcr_core.store.models import Agent

if TYPE_CHECKING:
    from orcr_core.server.context import ServerContext

_READERS_LOCK = threading.Lock()


def _readers(server: ServerContext) -> dict:
    return server.transcript_readers


def read_transcript(server: ServerContext, agent: Agent) -> TurnState | None:
    """The agent's transcript state, or None when it has none (yet).

    One incremental reader per agent, shared by the monitor, prompt delivery and
    ``agent read``; the lock keeps their polls from interleaving.
    """
    provider = server.registry.providers.get(agent.provider)
    if provider is None or not provider.has_transcript or not agent.agent_session_value:
        return None
    with _READERS_LOCK:
        readers = _readers(server)
        entry = readers.get(agent.uuid)
        if entry is not None and readers.get(("session", agent.uuid)) != agent.agent_session_value:
            entry = None  # the agent follows another session now: read its transcript
        if entry is None:
            pointer = SessionPointer(
                agent.agent_session_source, agent.agent_session_kind, agent.agent_session_value
            )
            path = provider.locate_transcript(pointer, launch_spec(server, agent))
            if path is None:
                return None
            entry = readers[agent.uuid] = provider.open_reader(path)
            readers[("path", agent.uuid)] = path
            readers[("session", agent.uuid)] = agent.agent_session_value
        return entry.poll()


def path_of(server: ServerContext, uuid: str) -> str | None:
    """The transcript path of an agent whose reader exists (what the monitor watches)."""
    with _READERS_LOCK:
        return _readers(server).get(("path", uuid))


def forget_except(server: ServerContext, live: set[str]) -> None:
    """Drop the readers (and paths, version marks) of agents no longer active."""
    with _READERS_LOCK:
        readers = _readers(server)
        for key in [k for k in readers if (k[1] if isinstance(k, tuple) else k) not in live]:
            readers.pop(key, None)


def version_changed(server: ServerContext, uuid: str, version: str) -> bool:
    """True the first time an agent's transcript shows ``version`` (checked once per change)."""
    with _READERS_LOCK:
        readers = _readers(server)
        if readers.get(("version", uuid)) == version:
            return False
        readers[("version", uuid)] = version
        return True
