"""Restart recovery: one serialized transaction per loop, an event row per decision.

For each loop that is not ended, or still has unfinished runs:

* a running or stopping run whose supervisor recorded an exit while the server
  was down gets that exit status (it is never lost);
* one whose supervisor still lives (pid and start time match) is adopted: the
  server watches it again;
* one whose supervisor is gone without a record is closed as dead (``failed``),
  its process group killed only if the identity guard passes, its agents
  glob-killed; one that never got a supervisor is claimed and closed;
* stopping runs resume the stop path; the active count is recomputed; pending
  runs start as slots allow unless the loop is paused (``loop.paused_hold``);
* ``next_fire_at`` is recomputed, skipping missed fires with a ``loop.missed`` row.
"""

from __future__ import annotations

from orcr_core.loops import defs, runs
from orcr_core.loops import supervisor as supervisor_mod
from orcr_core.loops.fires import _missed
from orcr_core.store import events
from orcr_core.store.models import RUN_ACTIVE, Loop, LoopRun, db


def _decide(run: LoopRun, loop: Loop, now: float) -> tuple[str, int | None]:
    """Inside the loop's transaction: settle one running/stopping run.
    Returns (decision, supervisor pid to watch or None)."""
    st = runs.read_state(loop.uuid, run.run_id)
    if st is None and not run.sup_pid:
        # never handed to a supervisor: claim it, so a late one cannot start it
        path = runs.state_path(loop.uuid, run.run_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        if supervisor_mod.claim(str(path), {"abandoned": True}):
            runs.set_status(
                run,
                "failed",
                now,
                error="the server stopped before the run's command started",
                note={"decision": "never started"},
            )
            return "never_started", None
        st = runs.read_state(loop.uuid, run.run_id)
    st = st or {}
    if st.get("exit_code") is not None or st.get("error"):
        if run.status == "running":
            fields = {"exit_code": st.get("exit_code"), "ended_at": st.get("ended_at") or now}
            if st.get("error"):
                fields["error"] = st["error"]
            runs.set_status(
                run,
                runs.final_status(st.get("exit_code")),
                now,
                note={"decision": "exited while the server was down"},
                **fields,
            )
        else:
            LoopRun.update(exit_code=st.get("exit_code")).where(LoopRun.uuid == run.uuid).execute()
        return ("exited" if run.status != "stopping" else "exited_stopping"), None
    sup_pid = run.sup_pid or st.get("supervisor")
    sup_start = run.sup_start or st.get("supervisor_start")
    if runs.identity_ok(sup_pid, sup_start, running=True):
        fields = {}
        if not run.pid and st.get("pid"):
            fields = {"pid": st["pid"], "pgid": st["pgid"], "proc_start": st.get("start")}
            LoopRun.update(**fields).where(LoopRun.uuid == run.uuid).execute()
            run.pid, run.pgid, run.proc_start = st["pid"], st["pgid"], st.get("start")
        events.emit(
            "run.recovered",
            loop=loop.uuid,
            run=run.uuid,
            run_id=run.run_id,
            decision="still running; supervisor adopted",
            supervisor=sup_pid,
            pid=run.pid,
        )
        return "adopted", sup_pid
    # the supervisor is gone and left no exit status (a reboot, a SIGKILL)
    if run.status == "stopping":
        return "dead", None  # the resumed stop path closes it as stopped/timeout
    # its group is signalled after this transaction (the intent row must be
    # committed before the signal), with the identity guard checked again then
    runs.set_status(
        run,
        "failed",
        now,
        error="the run's supervisor vanished without recording an exit status",
        note={"decision": "dead"},
    )
    return "dead", None


def recover(sched) -> dict:
    """Run once at server start, before the scheduler's threads."""
    now = sched.clock()
    missed_after = sched.config.duration("loops.missed_after")
    down = {"reason": "server_down", "from": runs.last_alive(), "to": now}
    uuids = [
        r[0]
        for r in db.execute_sql(
            "SELECT uuid FROM loop WHERE status != 'ended' UNION "
            "SELECT DISTINCT loop FROM loop_run WHERE status IN ('pending', 'running', 'stopping')"
        ).fetchall()
    ]
    summary = {
        "adopted": 0,
        "exited": 0,
        "exited_stopping": 0,
        "dead": 0,
        "never_started": 0,
        "missed": 0,
    }
    for uuid in uuids:
        watch, resume, dead, exited = [], [], [], []
        with db.atomic("IMMEDIATE"):
            loop = Loop.get_or_none(Loop.uuid == uuid)
            if loop is None:
                continue
            active_runs = list(
                LoopRun.select().where((LoopRun.loop == uuid) & LoopRun.status.in_(RUN_ACTIVE))
            )
            for run in active_runs:
                decision, sup_pid = _decide(run, loop, now)
                summary[decision] += 1
                if sup_pid:
                    watch.append((run.uuid, sup_pid))
                if decision == "dead" and run.status != "stopping":
                    dead.append(run)
                if decision == "exited":
                    exited.append(run)
                if run.status == "stopping":
                    resume.append(run.uuid)
            active = (
                LoopRun.select()
                .where((LoopRun.loop == uuid) & LoopRun.status.in_(RUN_ACTIVE))
                .count()
            )
            pending = (
                LoopRun.select()
                .where((LoopRun.loop == uuid) & (LoopRun.status == "pending"))
                .count()
            )
            if loop.status == "paused" and pending:
                events.emit("loop.paused_hold", loop=uuid, name=loop.name, pending=pending)
            if (
                loop.status == "active"
                and loop.next_fire_at is not None
                and now - loop.next_fire_at > missed_after
            ):
                _missed(loop, loop.next_fire_at, now, down)
                summary["missed"] += 1
            loop = Loop.get_by_id(uuid)
            events.emit(
                "loop.recovered",
                loop=uuid,
                name=loop.name,
                status=loop.status,
                active=active,
                pending=pending,
                next_fire_at=defs.iso(loop.next_fire_at),
            )
        for run_uuid, sup_pid in watch:
            sched.watch(run_uuid, sup_pid, None)
        for run_uuid in resume:
            sched.stops.stop_run(run_uuid)
        for run in dead:
            runs.signal_group(
                run, 9, why="its supervisor vanished; the exit status could not be recorded"
            )
        for run in dead + exited:
            sched.stops.after_exit(run)  # their agents end with them
        sched.start_pending(uuid)
    summary["orphans"] = _orphans(sched)
    return summary


def _orphans(sched) -> int:
    """Agents still alive under a run that has ended (the server stopped while it
    was ending them): end them now. A ``--keep-agents`` loop's runs that exited
    by themselves keep theirs."""
    rows = db.execute_sql(
        "SELECT DISTINCT r.uuid FROM agent a JOIN loop l ON l.name = substr(a.path, 1, "
        "instr(a.path, '/') - 1) JOIN loop_run r ON r.loop = l.uuid "
        "AND a.path LIKE l.name || '/' || r.run_id || '/%' "
        "WHERE a.status != 'ended' AND r.status IN ('ok', 'failed', 'timeout', 'stopped', "
        "'canceled') AND NOT (l.keep_agents AND r.exit_code IS NOT NULL "
        "AND r.status IN ('ok', 'failed'))"
    ).fetchall()
    for (run_uuid,) in rows:
        sched.stops.after_exit(LoopRun.get_by_id(run_uuid))
    return len(rows)
