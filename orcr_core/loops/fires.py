"""Fires: what the scheduler does when a loop's ``next_fire_at`` has come.

Each due loop is decided in one transaction of its own: fire into a free slot,
queue a pending run (coalescing scheduled fires into one), skip at the cap
(``--overlap skip``), or skip fires that are too late (missed: the machine
slept, the server was down), which are logged and never replayed.
"""

from __future__ import annotations

import json

from orcr_core.loops import cadence, defs, runs
from orcr_core.store import events
from orcr_core.store.models import RUN_ACTIVE, Loop, LoopRun, db


def fire_due(now: float, missed_after: float, why: dict | None = None, clock=None) -> list[LoopRun]:
    """Fire every active loop whose ``next_fire_at`` has come, one transaction per
    loop. Returns the runs that fired into a free slot: already ``running`` (in the
    fire's own transaction), to be launched. ``why`` says why a fire found too
    late was missed (see :func:`_missed`).

    ``clock`` (the scheduler's wall clock) is read again inside each loop's
    transaction, once it holds the write lock: a fire is decided at the time it is
    recorded, not at the time the tick began. A wait for a busy store, or a machine
    that slept in between, would otherwise record a fire later than ``missed_after``
    (the soak's clock jump landing between the two: fires 62 s late). Every event the
    transaction writes is stamped with that same instant, the one its rows record
    (a run's ``created_at``, a once loop's ``ended_at``): a wall clock that jumps
    forward while the transaction runs (a suspend, an NTP step) must not make a fire
    decided on time read as one replayed late (the soak's seed 2803: ``loop.fired``
    45 s after its due time, its run created 4 ms after it)."""
    to_start: list[LoopRun] = []
    due_loops = [
        r[0]
        for r in db.execute_sql(
            "SELECT uuid FROM loop WHERE status = 'active' AND next_fire_at <= ?", (now,)
        ).fetchall()
    ]
    for uuid in due_loops:
        with db.atomic("IMMEDIATE"):
            if clock is not None:
                now = max(now, clock())
            loop = Loop.get_or_none(Loop.uuid == uuid)
            if loop is None or loop.status != "active" or loop.next_fire_at is None:
                continue
            due = loop.next_fire_at
            if due > now:
                continue
            if now - due > missed_after:
                _missed(loop, due, now, why, ts=now)
                continue
            run = _fire(loop, due, now)
            if run is not None:
                to_start.append(run)
            if loop.cron:
                nxt = cadence.next_fire(loop.cron, loop.tz, due)
                Loop.update(next_fire_at=nxt).where(Loop.uuid == loop.uuid).execute()
            else:
                defs.end(loop, "fired", now, ts=now)
    return to_start


def _missed(
    loop: Loop, due: float, now: float, why: dict | None = None, *, ts: float | None = None
) -> None:
    """Inside the loop's transaction: skip fires that are too late, never replay
    them; one ``loop.missed`` row, and the loop keeps the last miss with why
    (``loop ls``, ``top``). ``why``: ``{"reason": "server_down" | "asleep" |
    "paused" | "late", "from": ts, "to": ts}`` (the interval when known). ``ts`` stamps
    its events, else the clock at the write."""
    why = dict(why or {"reason": "late"})
    if loop.cron:
        n, _first, nxt = cadence.count_between(loop.cron, loop.tz, due, now)
        n += 1  # the due fire itself, then every later one up to now
    else:
        n, nxt = 1, None
    record = {
        "first": defs.iso(due),
        "count": n,
        "reason": why.get("reason", "late"),
        "from": defs.iso(why.get("from")),
        "to": defs.iso(why.get("to")),
        "late_by": round(now - due, 3),
    }
    Loop.update(next_fire_at=nxt, last_missed=json.dumps(record)).where(
        Loop.uuid == loop.uuid
    ).execute()
    data = dict(
        loop=loop.uuid,
        name=loop.name,
        first=record["first"],
        count=n,
        late_by=record["late_by"],
        reason=record["reason"],
        why=defs.missed_text(record, loop.tz),
    )
    if loop.cron:
        events.emit("loop.missed", more=n >= 1000, next_fire_at=defs.iso(nxt), ts=ts, **data)
    else:
        events.emit("loop.missed", ts=ts, **data)
        defs.end(loop, "missed", now, ts=ts)


def _fire(loop: Loop, due: float, now: float) -> LoopRun | None:
    """Inside the loop's transaction: allocate, coalesce or skip. Returns the run
    when it starts now (a slot was free)."""
    active = (
        LoopRun.select().where((LoopRun.loop == loop.uuid) & LoopRun.status.in_(RUN_ACTIVE)).count()
    )
    pending = list(
        LoopRun.select()
        .where((LoopRun.loop == loop.uuid) & (LoopRun.status == "pending"))
        .order_by(LoopRun.created_at)
    )
    at_cap = active >= loop.max_concurrency or bool(pending)
    if at_cap and loop.overlap == "skip":
        events.emit(
            "loop.skipped",
            loop=loop.uuid,
            name=loop.name,
            due=defs.iso(due),
            active=active,
            why="at max-concurrency (overlap skip)",
            ts=now,
        )
        return None
    held = next((r for r in pending if r.kind == "scheduled"), None)
    if at_cap and held is not None:
        # coalesce: at most one pending scheduled run, due at the earliest missed fire
        LoopRun.update(due_at=min(held.due_at, due), fires=LoopRun.fires + 1).where(
            LoopRun.uuid == held.uuid
        ).execute()
        events.emit(
            "loop.coalesced",
            loop=loop.uuid,
            run=held.uuid,
            name=loop.name,
            run_id=held.run_id,
            due=defs.iso(due),
            due_at=defs.iso(min(held.due_at, due)),
            fires=held.fires + 1,
            ts=now,
        )
        return None
    run = runs.allocate(loop, "scheduled", due, now, ts=now)
    events.emit(
        "loop.fired",
        loop=loop.uuid,
        run=run.uuid,
        name=loop.name,
        run_id=run.run_id,
        due=defs.iso(due),
        queued=at_cap,
        ts=now,
    )
    if at_cap:
        return None
    runs.set_status(run, "running", now, started_at=now, ts=now)
    return run
