"""Event rows, the in-memory wakeup bus, cursor pins and retention.

The durable cursor is the ``event`` table itself (``seq`` is an AUTOINCREMENT
key, so it never goes backwards or repeats, even after retention deletes old
rows). The bus carries no data: it only wakes threads that then read rows with
``seq > cursor``. A pinned cursor holds retention back: ``watch.open`` and
``events.subscribe`` pin theirs for as long as they stream, so a watcher or a
follower under churn, however slow, never loses an event it has not been sent. A
server's start pins everything for ``events.resume_grace`` (a pin with an expiry):
the followers of the server before it reconnect and pin their own cursors first.
"""

from __future__ import annotations

import json
import threading
import time
from itertools import count

from orcr_core.common import clock
from orcr_core.store.models import Event, Meta, db

_INSERT = "INSERT INTO event (ts, kind, agent, loop, run, data) VALUES (?, ?, ?, ?, ?, ?)"


def emit(kind: str, agent: str | None = None, *, ts: float | None = None, **data) -> int:
    """Write one event row. Call inside the transaction of the change it describes.

    ``ts``: the instant the change took, when the row beside it records that same
    instant (a clock that starts there); otherwise now.

    Plain SQL: this runs in every state change, and peewee's query building
    would cost more than the insert itself.
    """
    loop, run = data.pop("loop", None), data.pop("run", None)
    when = clock.time() if ts is None else ts
    cur = db.execute_sql(
        _INSERT, (when, kind, agent, loop, run, json.dumps(data, separators=(",", ":")))
    )
    return cur.lastrowid


_LAST_OF = "SELECT MAX(seq) FROM event WHERE agent = ? AND kind = ?"
_HAS = "SELECT 1 FROM event WHERE agent = ? AND kind = ? AND seq > ? LIMIT 1"


def last_of(agent: str, kind: str) -> int | None:
    """The seq of the agent's latest ``kind`` event, None if it has none. Plain SQL:
    a delivery and a start ask at each step (peewee's text building cost more than
    the lookup, ``bench/lifetime.py --profile``)."""
    return db.execute_sql(_LAST_OF, (agent, kind)).fetchone()[0]


def has(agent: str, kind: str, after: int = 0) -> bool:
    """Whether the agent has a ``kind`` event past seq ``after``."""
    return db.execute_sql(_HAS, (agent, kind, after)).fetchone() is not None


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


_SINCE = (
    "SELECT seq, ts, kind, agent, loop, run, data FROM event WHERE seq > ? ORDER BY seq LIMIT ?"
)
_LAST = "SELECT MAX(seq) FROM event"


def since(seq: int, limit: int = 1000) -> list[dict]:
    """The events after ``seq``, oldest first, as the API sends them. Plain SQL: every
    write wakes the notifier and each follower, and each reads here."""
    return [
        {"seq": s, "ts": ts, "kind": k, "agent": a, "loop": lp, "run": r, "data": json.loads(d)}
        for s, ts, k, a, lp, r, d in db.execute_sql(_SINCE, (seq, limit))
    ]


def last_seq() -> int:
    return db.execute_sql(_LAST).fetchone()[0] or 0


class Bus:
    """Wakes waiters when new event rows (or other work) exist. No payloads."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._generation = 0
        self._pins: dict[int, tuple[int, float | None]] = {}
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
    def pin(self, seq: int, expires: float | None = None) -> int:
        """Hold retention at ``seq``; with ``expires`` (a ``time.monotonic()`` instant)
        the pin lets go by itself then."""
        with self._cond:
            pid = next(self._pin_ids)
            self._pins[pid] = (seq, expires)
            return pid

    def move_pin(self, pid: int, seq: int) -> None:
        with self._cond:
            if pid in self._pins:
                self._pins[pid] = (seq, self._pins[pid][1])

    def unpin(self, pid: int) -> None:
        with self._cond:
            self._pins.pop(pid, None)

    def oldest_pin(self) -> int | None:
        now = time.monotonic()
        with self._cond:
            for pid in [p for p, (_, exp) in self._pins.items() if exp is not None and exp <= now]:
                del self._pins[pid]
            return min(seq for seq, _ in self._pins.values()) if self._pins else None


class RetentionPasses:
    """When the monitor runs :func:`apply_retention`: after a write (events come only
    with writes), and when the oldest pin has moved since the last pass. A pin that
    held a pass back (a follower reading on, the notifier's cursor behind, a watch's
    grace running out) can let go with no write after it; the rows it held then stayed
    until some later write (a CI rerun of ``test_watch.py``'s retention-floor test,
    whose agents had settled while the notifier's pin was still behind).
    Planted: the pin left out of the key -> ``tests/test_follow_pin.py`` fails."""

    def __init__(self) -> None:
        self._seen: tuple[int, int | None] | None = None

    def after_step(self, bus: Bus, writes: int, keep: int, keep_per_loop: int | None) -> int:
        """A pass if ``writes`` (the store's write transactions) or the oldest pin
        moved since the last one; the rows it deleted."""
        key = (writes, bus.oldest_pin())
        if key == self._seen:
            return 0
        self._seen = key
        return apply_retention(bus, keep, keep_per_loop)


#: the per-loop pass runs once this many new rows have been written since the last
_LOOP_PASS_EVERY = 1000
_loop_pass_at = [0]


def apply_retention(bus: Bus, keep: int, keep_per_loop: int | None = None) -> int:
    """Delete events beyond the newest ``keep``, never past the oldest pin.

    A loop's own rows (``loop`` set: the scheduler's history, ``loop logs
    --source orcr``) are not counted against ``keep``: with ``keep_per_loop``
    each loop keeps its newest that many, so agent churn cannot evict them.
    """
    newest = last_seq()
    cutoff = newest - keep
    pinned = bus.oldest_pin()
    if pinned is not None:
        cutoff = min(cutoff, pinned)
    n = 0
    loop_rows = keep_per_loop is not None
    where = "seq <= ?" + (" AND loop IS NULL" if loop_rows else "")
    if (
        cutoff > 0
        and db.execute_sql(f"SELECT 1 FROM event WHERE {where} LIMIT 1", (cutoff,)).fetchone()
    ):
        with db.atomic("IMMEDIATE"):
            q = Event.delete().where(Event.seq <= cutoff)
            if loop_rows:
                q = q.where(Event.loop.is_null())
            n = q.execute()
            if n:
                Meta.replace(key="events_floor", value=str(cutoff)).execute()
    if loop_rows and newest - _loop_pass_at[0] >= _LOOP_PASS_EVERY:
        _loop_pass_at[0] = newest
        n += _trim_loops(keep_per_loop, pinned)
    return n


def _trim_loops(keep: int, pinned: int | None) -> int:
    """Each loop keeps its newest ``keep`` rows (never past a pin)."""
    over = db.execute_sql(
        "SELECT loop FROM event WHERE loop IS NOT NULL GROUP BY loop HAVING COUNT(*) > ?", (keep,)
    ).fetchall()
    n = 0
    for (loop,) in over:
        row = db.execute_sql(
            "SELECT seq FROM event WHERE loop = ? ORDER BY seq DESC LIMIT 1 OFFSET ?", (loop, keep)
        ).fetchone()
        if row is None:
            continue
        cut = row[0] if pinned is None else min(row[0], pinned)
        with db.atomic("IMMEDIATE"):
            n += Event.delete().where((Event.loop == loop) & (Event.seq <= cut)).execute()
    return n
