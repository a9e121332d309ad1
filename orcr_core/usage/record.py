"""Writing and reading the ``turn_usage`` rows (server side: imports peewee).

:func:`record` runs inside the transaction that records a turn's end (the
monitor's ``_set``), so a crash either keeps both or neither: the transcript is
read again after a restart and the turn ends (with its usage) then. The row's
key is (agent, turn): a turn is never counted twice.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from orcr_core.contracts import Turn
from orcr_core.store import faults
from orcr_core.store.models import Agent, TurnUsage

FIELDS = ("input", "output", "cache_read", "cache_write")


def record(agent: Agent, turns: Sequence[Turn], first: int, now: float | None = None) -> int:
    """Store the usage of ``turns`` (the transcript's turns ``first``+1 onwards that
    just ended); turns without usage are skipped. Returns the rows written.

    The fault point is here, at the write itself, so that it moves with the write: a
    kill there must find the turn's end not committed either."""
    faults.point("before_turn_usage")
    now = time.time() if now is None else now
    rows = [
        {
            "agent": agent.uuid,
            "turn": first + i + 1,
            "path": agent.path,
            "provider": agent.provider,
            "model": t.usage.model or agent.model,
            "ended_at": now,
            **{f: getattr(t.usage, f) for f in FIELDS},
        }
        for i, t in enumerate(turns)
        if t.usage is not None and t.status != "open"
    ]
    if not rows:
        return 0
    return TurnUsage.insert_many(rows).on_conflict_ignore().execute() or 0


def tokens(turns: Sequence[Turn]) -> int | None:
    """What ``turns`` spent in all (None when none reported usage)."""
    spent = [sum(getattr(t.usage, f) for f in FIELDS) for t in turns if t.usage is not None]
    return sum(spent) if spent else None


def of_agents(uuids: Sequence[str]) -> dict[str, dict]:
    """Each agent's totals: ``{uuid: {input, output, cache_read, cache_write, tokens,
    turns, model}}`` (one grouped query per 500 agents); agents with no usage are absent.

    ``model`` is the last turn's: with exactly one ``max()`` aggregate, SQLite takes a
    bare column from the row holding the maximum (its documented "bare columns in
    an aggregate query"), so no query per agent is needed; (agent, turn) is unique.
    """
    from peewee import fn

    out: dict[str, dict] = {}
    for i in range(0, len(uuids), 500):
        chunk = list(uuids[i : i + 500])
        sums = [fn.SUM(getattr(TurnUsage, f)) for f in FIELDS]
        query = (
            TurnUsage.select(
                TurnUsage.agent, *sums, fn.COUNT(TurnUsage.id), fn.MAX(TurnUsage.turn),
                TurnUsage.model,
            )
            .where(TurnUsage.agent.in_(chunk))
            .group_by(TurnUsage.agent)
            .tuples()
        )  # fmt: skip
        for uuid, *values, turns, _last, model in query:
            total = dict(zip(FIELDS, values, strict=True))
            total |= {"turns": turns, "model": model, "tokens": sum(values)}
            out[uuid] = total
    return out


def turns_of(uuid: str) -> list[dict]:
    """An agent's usage per turn, in turn order."""
    return [
        {
            "turn": r.turn,
            "model": r.model,
            "ended_at": r.ended_at,
            **{f: getattr(r, f) for f in FIELDS},
            "tokens": sum(getattr(r, f) for f in FIELDS),
        }
        for r in TurnUsage.select().where(TurnUsage.agent == uuid).order_by(TurnUsage.turn)
    ]


def attach(agents: list[dict], per_turn: bool = False) -> list[dict]:
    """Add ``usage`` (the agent's totals, None when it reported none) to each agent
    dict of the API, and with ``per_turn`` its ``usage_turns``."""
    totals = of_agents([a["uuid"] for a in agents])
    for a in agents:
        a["usage"] = totals.get(a["uuid"])
        if per_turn:
            a["usage_turns"] = turns_of(a["uuid"])
    return agents
