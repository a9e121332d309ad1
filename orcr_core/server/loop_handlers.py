"""Socket methods ``loop.*`` and ``loop.run.*`` (registered in the route table,
:mod:`orcr_core.server.routes`)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from orcr_core.loops import control, defs, runs
from orcr_core.loops.defs import LoopError
from orcr_core.server.routes import route
from orcr_core.store import events
from orcr_core.store.models import RUN_ENDED, Event, Loop, LoopRun, db

if TYPE_CHECKING:
    from orcr_core.server.context import ServerContext


def _target(params: dict, key: str = "target") -> str:
    value = params.get(key)
    if not isinstance(value, str) or not value:
        raise LoopError("invalid_params", f"missing parameter {key!r} (a loop name or uuid)")
    return value


@route("loop.create", short=True, errors=(LoopError,))
def loop_create(server: ServerContext, params):
    loop = defs.create(params)
    server.loops.wake()
    server.notify(queue=False)
    return {"loop": defs.loop_dict(loop)}


@route("loop.get", short=True, errors=(LoopError,))
def loop_get(server: ServerContext, params):
    return {"loop": defs.loop_dict(defs.resolve(_target(params)))}


@route("loop.list", short=True, errors=(LoopError,))
def loop_list(server: ServerContext, params):
    q = Loop.select().order_by(Loop.created_at)
    if not params.get("all"):
        q = q.where(Loop.status != "ended")
    return {"loops": defs.loop_dicts(list(q))}


@route("loop.pause", short=True, errors=(LoopError,))
def loop_pause(server: ServerContext, params):
    loop = defs.pause(defs.resolve(_target(params)))
    server.loops.wake()
    server.notify(queue=False)
    return {"loop": defs.loop_dict(loop)}


@route("loop.resume", short=True, errors=(LoopError,))
def loop_resume(server: ServerContext, params):
    loop = control.resume(defs.resolve(_target(params)))
    server.loops.start_pending(loop.uuid)
    server.loops.wake()
    server.notify(queue=False)
    return {"loop": defs.loop_dict(Loop.get_by_id(loop.uuid))}


@route("loop.rm", short=True, errors=(LoopError,))
def loop_rm(server: ServerContext, params):
    loop = defs.resolve(_target(params))
    canceled = control.remove(loop)
    server.loops.wake()
    server.notify(queue=False)
    return {
        "loop": defs.loop_dict(Loop.get_by_id(loop.uuid)),
        "canceled": [f"{loop.name}/{r.run_id}" for r in canceled],
    }


def _named_run(name: str, run_id: str) -> tuple[Loop, LoopRun] | None:
    """``NAME/RUN_ID`` across every definition of the name (a run id is unique
    within the name), or within the loop whose uuid ``name`` is."""
    by_uuid = Loop.get_or_none(Loop.uuid == name)
    defs_q = [by_uuid] if by_uuid else list(Loop.select().where(Loop.name == name))
    for loop in defs_q:
        run = LoopRun.get_or_none((LoopRun.loop == loop.uuid) & (LoopRun.run_id == run_id))
        if run is not None:
            return loop, run
    return None


def _older_unfinished(loop: Loop) -> list[LoopRun]:
    """Unfinished runs of the other definitions of ``loop``'s name: a loop removed
    while its run still runs, its name reused. They still answer to the name."""
    others = [
        lp.uuid for lp in Loop.select().where((Loop.name == loop.name) & (Loop.uuid != loop.uuid))
    ]
    if not others:
        return []
    return list(LoopRun.select().where(LoopRun.loop.in_(others) & LoopRun.status.not_in(RUN_ENDED)))


def _run_target(value: str) -> tuple[Loop, list[LoopRun]]:
    """``NAME`` (its unfinished runs, of every definition of the name),
    ``NAME/RUN_ID`` (across definitions), or a run uuid."""
    run = LoopRun.get_or_none(LoopRun.uuid == value)
    if run is not None:
        return Loop.get_by_id(run.loop), [run]
    name, _, run_id = value.partition("/")
    if run_id:
        found = _named_run(name, run_id)
        if found is None:
            defs.resolve(name)  # not_found for an unknown loop
            raise LoopError("not_found", f"no run {value!r} (orcr loop run ls {name})")
        return found[0], [found[1]]
    loop = defs.resolve(name)
    rows = list(
        LoopRun.select().where((LoopRun.loop == loop.uuid) & LoopRun.status.not_in(RUN_ENDED))
    )
    if loop.uuid != name:
        rows += _older_unfinished(loop)
    return loop, sorted(rows, key=lambda r: (r.created_at or 0, r.run_id))


@route("loop.run.start", short=True, errors=(LoopError,))
def loop_run_start(server: ServerContext, params):
    loop = defs.resolve(_target(params))
    now = time.time()
    with db.atomic("IMMEDIATE"):
        loop = Loop.get_by_id(loop.uuid)
        if loop.status == "ended":
            raise LoopError(
                "loop_ended", f"loop {loop.name} has ended ({loop.end_reason}); create it again"
            )
        run = runs.allocate(loop, "manual", now, now)
        if loop.status == "paused":
            events.emit(
                "loop.paused_hold",
                loop=loop.uuid,
                name=loop.name,
                run=run.uuid,
                run_id=run.run_id,
                why="the loop is paused; the run starts on resume",
            )
    server.loops.start_pending(loop.uuid)
    server.notify(queue=False)
    run = LoopRun.get_by_id(run.uuid)
    return {"run": defs.run_dict(run, loop.name)}


@route("loop.run.stop", short=True, errors=(LoopError,))
def loop_run_stop(server: ServerContext, params):
    loop, rows = _run_target(_target(params))
    wait = bool(params.get("wait"))
    out = []
    for run in rows:
        result = server.loops.stops.stop_run(run.uuid, "stopped", wait=wait)
        out.append({"path": f"{loop.name}/{run.run_id}", "uuid": run.uuid, "result": result})
    return {"stopped": out}


@route("loop.run.list", short=True, errors=(LoopError,))
def loop_run_list(server: ServerContext, params):
    target = _target(params)
    loop = defs.resolve(target)
    rows = list(LoopRun.select().where(LoopRun.loop == loop.uuid))
    if loop.uuid != target:
        rows += _older_unfinished(loop)
    rows.sort(key=lambda r: (r.created_at or 0, r.run_id))
    from orcr_core.usage import sums

    spent = sums.by_child(loop.name)  # the tokens of each run's agents <loop>/<run_id>/**
    return {
        "loop": loop.uuid,
        "runs": [dict(defs.run_dict(r, loop.name), usage=spent.get(r.run_id)) for r in rows],
    }


@route("loop.logs", short=True, errors=(LoopError,))
def loop_logs(server: ServerContext, params):
    """``source=orcr``: the loop's event rows (``since_seq`` pages on); ``source=run``:
    where each run's log file is (the caller reads it: same user, same machine)."""
    target = _target(params)
    loop = defs.resolve(target)
    source = params.get("source", "orcr")
    run_id = params.get("run")
    if run_id:
        found = _named_run(target, run_id)
        if found is None:
            raise LoopError("not_found", f"no run {loop.name}/{run_id}")
        loop = found[0]  # the run's own definition (the name may have been reused)
    rows = LoopRun.select().where(LoopRun.loop == loop.uuid).order_by(LoopRun.created_at)
    if run_id:
        rows = rows.where(LoopRun.run_id == run_id)
    if source == "run":
        return {
            "loop": defs.loop_dict(loop),
            "runs": [
                dict(defs.run_dict(r, loop.name), log=str(runs.log_path(loop.uuid, r.run_id)))
                for r in rows
            ],
        }
    if source != "orcr":
        raise LoopError("invalid_params", f"source {source!r}: use orcr or run")
    since = params.get("since_seq") or 0
    q = Event.select().where((Event.loop == loop.uuid) & (Event.seq > since))
    if run_id:
        q = q.where(Event.run == rows.first().uuid)
    q = q.order_by(Event.seq).limit(int(params.get("limit") or 1000))
    out = {
        "loop": defs.loop_dict(loop),
        "events": [events.row_to_dict(e) for e in q],
        "last_seq": events.last_seq(),
    }
    if run_id:
        out["run"] = defs.run_dict(rows.first(), loop.name)
    return out
