"""Event rows, the in-memory wakeup bus, cursor pins and retention.

The durable cursor is the ``event`` table itself (``seq`` is an AUTOINCREMENT
key, so it never goes backwards or repeats, even after retention deletes old
rows). The bus carries no data: it only wakes threads that then read rows with
``seq > cursor``. A pinned cursor (``watch.open``) holds retention back, so a
watcher under churn can never lose events between its snapshot and its stream.
"""

from __future__ import annotations

import json
import threading
import time
from itertools import count

from orcr_core.store.models import Event, Meta, db

_INSERT = "INSERT INTO event (ts, kind, agent, loop, run, data) VALUES (?, ?, ?, ?, ?, ?)"


def emit(kind: str, agent: str | None = None, **data) -> int:
    """Write one event row. Call inside the transaction of the change it describes.

    Plain SQL: this runs in every state change, and peewee's query building
    would cost more than the insert itself.
    """
    loop, run = data.pop("loop", None), data.pop("run", None)
    cur = db.execute_sql(
        _INSERT, (time.time(), kind, agent, loop, run, json.dumps(data, separators=(",", ":")))
    )
    return cur.lastrowid


def row_to_dict(row) -> dict:
    return {
        "seq": row.seq,
        "ts": row.ts,
        "kind": row.kind,
        "agent": row.agent,
        "loop": row.loop,
        "run": row.run,
        "data": json.loads(row.data),
    }


def since(seq: int, limit: int = 1000) -> list[dict]:
    rows = Event.select().where(Event.seq > seq).order_by(Event.seq).limit(limit)
    return [row_to_dict(r) for r in rows]


def last_seq() -> int:
    row = Event.select(Event.seq).order_by(Event.seq.desc()).first()
    return row.seq if row else 0


class Bus:
    """Wakes waiters when new event rows (or other work) exist. No payloads."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._generation = 0
        self._pins: dict[int, int] = {}
        self._pin_ids = count(1)

    def notify(self) -> None:
        with self._cond:
            self._generation += 1
            self._cond.notify_all()

    def generation(self) -> int:
        with self._cond:
            return self._generation

    def wait(self, generation: int, timeout: float | None) -> int:
        """Block until the generation moves past ``generation`` (or timeout)."""
        with self._cond:
            if self._generation == generation:
                self._cond.wait(timeout)
            return self._generation

    # cursor pins: retention never deletes events a pinned watcher has not read
    def pin(self, seq: int) -> int:
        with self._cond:
            pid = next(self._pin_ids)
            self._pins[pid] = seq
            return pid

    def move_pin(self, pid: int, seq: int) -> None:
        with self._cond:
            if pid in self._pins:
                self._pins[pid] = seq

    def unpin(self, pid: int) -> None:
        with self._cond:
            self._pins.pop(pid, None)

    def oldest_pin(self) -> int | None:
        with self._cond:
            return min(self._pins.values()) if self._pins else None


def apply_retention(bus: Bus, keep: int) -> int:
    """Delete events beyond the newest ``keep``, never past the oldest pin."""
    newest = last_seq()
    cutoff = newest - keep
    pinned = bus.oldest_pin()
    if pinned is not None:
        cutoff = min(cutoff, pinned)
    if cutoff <= 0:
        return 0
    if db.execute_sql("SELECT 1 FROM event WHERE seq <= ? LIMIT 1", (cutoff,)).fetchone() is None:
        return 0  # nothing to delete: no write transaction
    with db.atomic("IMMEDIATE"):
        n = Event.delete().where(Event.seq <= cutoff).execute()
        if n:
            Meta.replace(key="events_floor", value=str(cutoff)).execute()
        return n
