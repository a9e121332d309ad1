"""Which agent a request names: by uuid, by path, or by a path glob.

Shared by every handler module (a leaf under them, so none imports another)."""

from __future__ import annotations

from orcr_core import paths
from orcr_core.contracts import AgentStatus
from orcr_core.protocol import ProtocolError
from orcr_core.store.models import Agent, db

#: the active row first, else the newest ended one
_BY_PATH = (
    "SELECT id FROM agent WHERE path = ? "
    f"ORDER BY status = '{AgentStatus.ENDED.value}' ASC, id DESC LIMIT 1"
)


def resolve(target: str) -> Agent:
    """An agent by uuid, or by path: the active row first, else the newest ended one.
    A leading ``/`` (a path named from the top inside a scope) is dropped."""
    target = target.lstrip("/")
    row = Agent.get_or_none(Agent.uuid == target)
    if row is None:
        # plain SQL: every call naming an agent by path comes here
        found = db.execute_sql(_BY_PATH, (target,)).fetchone()
        row = Agent.get_or_none(Agent.id == found[0]) if found else None  # (GC may race)
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
            for a in Agent.select().where(Agent.status != AgentStatus.ENDED)
            if paths.glob_match(target, a.path)
        ]
        return rows
    return [resolve(target)]
