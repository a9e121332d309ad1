"""The monitor's rows as last read, and which of them moved since.

The monitor re-reads the active rows after every write transaction. Comparing each
row whole with the object in memory made every write cost O(fleet) in Python: at 40
agents a sixth of a lifetime's server CPU (bench/lifetime.py). Instead each row
carries a revision, ``agent.rev``, that SQLite itself bumps on every UPDATE of the
row (a trigger, store migration ``agent_rev``), whoever writes it and however (a
model's save, a compiled UPDATE, raw SQL, another process). A read asks for each
active row's uuid and revision, and fetches whole only the rows whose revision
moved, or whose object in memory no longer holds what was read (a transaction
that changed the object and rolled back): the object is made again.
"""

from __future__ import annotations

from orcr_core.store.models import Agent, db

#: SQLite's default limit on a statement's parameters is 999 (older builds)
_CHUNK = 500


class ActiveRows:
    """What was read of each active row: its revision and a copy of its values."""

    def __init__(self) -> None:
        self._revs: dict[str, int] = {}
        self._copies: dict[str, dict] = {}

    def read(
        self, sql: str, params: tuple, fields: list, old: dict[str, Agent]
    ) -> tuple[dict[str, Agent], list[Agent]]:
        """The rows of ``sql`` (a compiled whole-row select of the active statuses,
        ``params`` its statuses), in the store's order, the unmoved ones as the objects
        of ``old``; and the rows made again. A row that left the statuses between the
        two reads is not found, as if read after."""
        statuses = ", ".join("?" * len(params))
        order: list[str] = []
        kept: dict[str, Agent] = {}
        for uuid, rev in db.execute_sql(
            f"SELECT uuid, rev FROM agent WHERE status IN ({statuses})", params
        ):
            order.append(uuid)
            before = old.get(uuid)
            if (
                before is not None
                and self._revs.get(uuid) == rev
                and before.__data__ == self._copies.get(uuid)
            ):
                kept[uuid] = before
        stale = [uuid for uuid in order if uuid not in kept]
        at = [name for name, _ in fields].index("uuid")
        head, _, where = sql.partition(' FROM "agent" AS "t1" ')
        fetched: dict[str, Agent] = {}
        for i in range(0, len(stale), _CHUNK):
            part = stale[i : i + _CHUNK]
            marks = ", ".join("?" * len(part))
            for *raw, rev in db.execute_sql(
                f'{head}, "t1"."rev" FROM "agent" AS "t1" {where} AND ("t1"."uuid" IN ({marks}))',
                (*params, *part),
            ):
                agent = fetched[raw[at]] = Agent.from_row(fields, raw)
                self._revs[agent.uuid] = rev
                self._copies[agent.uuid] = dict(agent.__data__)
        rows: dict[str, Agent] = {}
        changed: list[Agent] = []
        for uuid in order:
            if uuid in kept:
                rows[uuid] = kept[uuid]
            elif uuid in fetched:
                rows[uuid] = fetched[uuid]
                changed.append(fetched[uuid])
        return rows, changed

    def drop(self, uuid: str) -> None:
        """Forget a row that is no longer active."""
        self._revs.pop(uuid, None)
        self._copies.pop(uuid, None)
