"""Changing a loop's course where its fires and runs are concerned: resume (a once
loop whose time passed during the pause is missed, never fired late) and remove (its
pending runs canceled). Above :mod:`~orcr_core.loops.defs`, :mod:`~orcr_core.loops.runs`
and :mod:`~orcr_core.loops.fires`, which never import it.
"""

from __future__ import annotations

import time

from orcr_core.common.times import iso
from orcr_core.loops import cadence, defs
from orcr_core.loops import runs as runs_mod
from orcr_core.loops.fires import _missed
from orcr_core.store import events
from orcr_core.store.models import Loop, LoopRun, db


def resume(loop: Loop, now: float | None = None) -> Loop:
    """Fires that fell in the pause are not replayed: the next fire counts from now."""
    now = time.time() if now is None else now
    with db.atomic("IMMEDIATE"):
        loop = Loop.get_by_id(loop.uuid)
        if loop.status != "paused":
            raise defs.LoopError("not_paused", f"loop {loop.name} is {loop.status}, not paused")
        if loop.cron:
            nxt = cadence.next_fire(loop.cron, loop.tz, now)
        else:
            nxt = loop.once_at
        Loop.update(status="active", next_fire_at=nxt).where(Loop.uuid == loop.uuid).execute()
        events.emit("loop.resumed", loop=loop.uuid, name=loop.name, next_fire_at=iso(nxt))
        if nxt is not None and nxt <= now:
            # a once loop whose time passed during the pause: skipped and logged
            # (the seed's rule for missed fires), never fired late
            _missed(Loop.get_by_id(loop.uuid), nxt, now, {"reason": "paused"})
    return Loop.get_by_id(loop.uuid)


def remove(loop: Loop, now: float | None = None) -> list[LoopRun]:
    """End the loop; its pending runs are canceled. Running runs finish (or are stopped
    with ``loop run stop``). Returns the canceled runs."""
    now = time.time() if now is None else now
    with db.atomic("IMMEDIATE"):
        loop = Loop.get_by_id(loop.uuid)
        if loop.status == "ended":
            raise defs.LoopError("not_active", f"loop {loop.name} has ended already")
        pending = list(
            LoopRun.select().where((LoopRun.loop == loop.uuid) & (LoopRun.status == "pending"))
        )
        for run in pending:
            runs_mod.set_status(run, "canceled", now, note={"why": "loop removed"})
        defs.end(loop, "removed", now)
    return pending
