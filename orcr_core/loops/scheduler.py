"""The loop scheduler: a server thread that sleeps until the earliest due time.

One timer, never a scan: the thread computes the earliest ``next_fire_at`` of
an active loop (an indexed ``MIN``) and the earliest run deadline (timeouts),
then sleeps on a bus until then, or until any loop change wakes it. Waits are
capped at a minute because a monotonic sleep does not advance while the
machine is suspended: after a resume the scheduler looks at the wall clock
within a minute, and fires later than ``loops.missed_after`` are skipped and
logged, never replayed.

A second thread, the reaper, waits on a pidfd per run supervisor (and a wake
pipe), so a run's end is noticed the moment its supervisor exits.
"""

from __future__ import annotations

import json
import logging
import os
import select
import subprocess
import sys
import threading
import time

import psutil

from orcr_core import events, faults
from orcr_core.events import Bus
from orcr_core.loops import cadence, defs, runs
from orcr_core.loops import supervisor as supervisor_mod
from orcr_core.store.models import RUN_ACTIVE, Loop, LoopRun, db

log = logging.getLogger("orcr.loops")

MAX_WAIT = 60.0
#: warm supervisors kept waiting: a fire never waits for Python to start
SPARES = 2
_NEXT_FIRE = "SELECT MIN(next_fire_at) FROM loop WHERE status = 'active'"
_DEADLINES = (
    "SELECT MIN(r.started_at + l.timeout) FROM loop_run r JOIN loop l ON r.loop = l.uuid "
    "WHERE r.status = 'running' AND l.timeout IS NOT NULL"
)


def fire_due(now: float, missed_after: float) -> list[LoopRun]:
    """Fire every active loop whose ``next_fire_at`` has come, one transaction per
    loop. Returns the runs that fired into a free slot: already ``running`` (in the
    fire's own transaction), to be launched."""
    to_start: list[LoopRun] = []
    due_loops = [
        r[0]
        for r in db.execute_sql(
            "SELECT uuid FROM loop WHERE status = 'active' AND next_fire_at <= ?", (now,)
        ).fetchall()
    ]
    for uuid in due_loops:
        with db.atomic("IMMEDIATE"):
            loop = Loop.get_or_none(Loop.uuid == uuid)
            if loop is None or loop.status != "active" or loop.next_fire_at is None:
                continue
            due = loop.next_fire_at
            if due > now:
                continue
            if now - due > missed_after:
                _missed(loop, due, now)
                continue
            run = _fire(loop, due, now)
            if run is not None:
                to_start.append(run)
            if loop.cron:
                nxt = cadence.next_fire(loop.cron, loop.tz, due)
                Loop.update(next_fire_at=nxt).where(Loop.uuid == loop.uuid).execute()
            else:
                defs.end(loop, "fired", now)
    return to_start


def _missed(loop: Loop, due: float, now: float) -> None:
    """Skip fires that are too late (asleep, server down), with one event row."""
    if loop.cron:
        n, _first, nxt = cadence.count_between(loop.cron, loop.tz, due, now)
        n += 1  # the due fire itself, then every later one up to now
        Loop.update(next_fire_at=nxt).where(Loop.uuid == loop.uuid).execute()
        events.emit(
            "loop.missed",
            loop=loop.uuid,
            name=loop.name,
            first=defs.iso(due),
            count=n,
            more=n >= 1000,
            next_fire_at=defs.iso(nxt),
            late_by=round(now - due, 3),
        )
    else:
        events.emit(
            "loop.missed",
            loop=loop.uuid,
            name=loop.name,
            first=defs.iso(due),
            count=1,
            late_by=round(now - due, 3),
        )
        defs.end(loop, "missed", now)


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
        )
        return None
    run = runs.allocate(loop, "scheduled", due, now)
    events.emit(
        "loop.fired",
        loop=loop.uuid,
        run=run.uuid,
        name=loop.name,
        run_id=run.run_id,
        due=defs.iso(due),
        queued=at_cap,
    )
    if at_cap:
        return None
    runs.set_status(run, "running", now, started_at=now)
    return run


class Scheduler:
    """The loops subsystem inside the server: timer, reaper, spare supervisor, stops."""

    def __init__(self, server, clock=time.time):
        self.server = server
        self.clock = clock
        self.bus = Bus()
        self._spares: list[subprocess.Popen] = []
        self._spare_lock = threading.Lock()
        self._watch: dict[int, tuple[str, subprocess.Popen | None]] = {}  # pidfd -> run
        self._watch_lock = threading.Lock()
        self._wake_r, self._wake_w = os.pipe()
        self._exited: dict[str, threading.Event] = {}
        self._stopping: set[str] = set()
        self._stop_lock = threading.Lock()
        self.last_tick_ms: float | None = None
        self.ticks = 0

    @property
    def config(self):
        return self.server.config

    def wake(self) -> None:
        """Any loop change: the timer recomputes its deadline."""
        self.bus.notify()

    # -- threads ----------------------------------------------------------
    def start(self) -> list[threading.Thread]:
        threads = []
        for target, name in ((self.timer_loop, "orcr-loops"), (self.reaper_loop, "orcr-reaper")):
            t = threading.Thread(target=target, name=name, daemon=True)
            t.start()
            threads.append(t)
        threading.Thread(target=self._refill_spare, name="orcr-spare", daemon=True).start()
        return threads

    def timer_loop(self) -> None:
        db.connect(reuse_if_open=True)
        while not self.server.stopping.is_set():
            gen = self.bus.generation()
            try:
                wait = self.tick()
            except Exception:
                log.exception("scheduler tick failed")
                wait = 1.0
            self.bus.wait(gen, timeout=wait)

    def status(self) -> dict:
        """For ``server.status``: how often the timer woke and what the last wake cost."""
        active = db.execute_sql("SELECT COUNT(*) FROM loop WHERE status = 'active'").fetchone()
        nxt = db.execute_sql(_NEXT_FIRE).fetchone()[0]
        return {
            "active": active[0],
            "next_fire_at": defs.iso(nxt),
            "ticks": self.ticks,
            "last_tick_ms": round(self.last_tick_ms, 3) if self.last_tick_ms else None,
            "warm_supervisors": len(self._spares),
        }

    def tick(self) -> float:
        """Fire what is due, time out what is over time; return how long to sleep."""
        self.ticks += 1
        t0 = time.perf_counter()
        now = self.clock()
        started = fire_due(now, self.config.duration("loops.missed_after"))
        self._launch_all(started)
        if started:
            self.server.notify(queue=False)
        self._timeouts(now)
        nxt = db.execute_sql(_NEXT_FIRE).fetchone()[0]
        deadline = db.execute_sql(_DEADLINES).fetchone()[0]
        self.last_tick_ms = (time.perf_counter() - t0) * 1000
        due = min(t for t in (nxt, deadline, now + MAX_WAIT) if t is not None)
        return max(0.0, min(MAX_WAIT, due - self.clock()))

    def _timeouts(self, now: float) -> None:
        rows = db.execute_sql(
            "SELECT r.uuid FROM loop_run r JOIN loop l ON r.loop = l.uuid "
            "WHERE r.status = 'running' AND l.timeout IS NOT NULL AND r.started_at + l.timeout <= ?",
            (now,),
        ).fetchall()
        for (uuid,) in rows:
            self.stop_run(uuid, "timeout")

    # -- starting runs -----------------------------------------------------
    def start_pending(self, loop_uuid: str) -> list[LoopRun]:
        started = runs.take_pending(loop_uuid, self.clock())
        self._launch_all(started)
        return started

    def _launch_all(self, started: list[LoopRun]) -> None:
        for run in started:
            try:
                self.launch(run)
            except Exception as exc:
                log.exception("launching run %s failed", run.uuid)
                with db.atomic("IMMEDIATE"):
                    run = LoopRun.get_by_id(run.uuid)
                    if run.status == "running":
                        runs.set_status(run, "failed", time.time(), error=f"launch failed: {exc}")
        if started:
            self.wake()  # a new run may bring the earliest timeout deadline

    def _spawn_supervisor(self) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-I", "-S", supervisor_mod.__file__],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd="/",
            start_new_session=True,  # outlives the server, away from its signals
            close_fds=True,
        )

    def _refill_spare(self) -> None:
        with self._spare_lock:
            while len(self._spares) < SPARES and not self.server.stopping.is_set():
                self._spares.append(self._spawn_supervisor())

    def _take_supervisor(self) -> subprocess.Popen:
        """The oldest warm spare (most likely done importing), else a new one."""
        sup = None
        with self._spare_lock:
            while self._spares and sup is None:
                sup = self._spares.pop(0)
                if sup.poll() is not None:
                    sup = None
        if sup is None:
            sup = self._spawn_supervisor()
        threading.Thread(target=self._refill_spare, name="orcr-spare", daemon=True).start()
        return sup

    def launch(self, run: LoopRun) -> None:
        """Hand the run to a supervisor; record what it started."""
        loop = Loop.get_by_id(run.loop)
        rdir = runs.run_dir(loop.uuid)
        rdir.mkdir(parents=True, exist_ok=True, mode=0o700)
        spec = {
            "argv": json.loads(loop.argv),
            "cwd": loop.cwd,
            "env": runs.child_env(loop, run, self.server.socket_path),
            "state": str(runs.state_path(loop.uuid, run.run_id)),
            "log": str(runs.log_path(loop.uuid, run.run_id)),
            "log_max": int(self.config.get("loops.log_max_bytes")),
        }
        faults.point("before_run_launch")
        sup = self._take_supervisor()
        self._exited[run.uuid] = threading.Event()
        # the spec first: the command should not wait on a transaction. A crash
        # before the supervisor pid is recorded is still safe: the supervisor
        # claims the run's state file with its own pid, or recovery claims it first
        sup.stdin.write((json.dumps(spec) + "\n").encode())
        sup.stdin.close()
        faults.point("after_run_launch")
        try:
            sup_start = psutil.Process(sup.pid).create_time()
        except psutil.Error:
            sup_start = None
        with db.atomic("IMMEDIATE"):
            LoopRun.update(sup_pid=sup.pid, sup_start=sup_start).where(
                LoopRun.uuid == run.uuid
            ).execute()
        self.watch(run.uuid, sup.pid, sup)
        answer = json.loads(sup.stdout.readline() or b"{}")
        sup.stdout.close()
        if "pid" in answer:
            with db.atomic("IMMEDIATE"):
                LoopRun.update(
                    pid=answer["pid"], pgid=answer["pgid"], proc_start=answer["start"]
                ).where(LoopRun.uuid == run.uuid).execute()
                events.emit(
                    "run.started",
                    loop=loop.uuid,
                    run=run.uuid,
                    run_id=run.run_id,
                    pid=answer["pid"],
                    pgid=answer["pgid"],
                    path=f"{loop.name}/{run.run_id}",
                )
        self.server.notify(queue=False)

    # -- the reaper ----------------------------------------------------------
    def watch(self, run_uuid: str, pid: int, popen: subprocess.Popen | None) -> bool:
        """Learn when the supervisor ``pid`` exits (a pidfd; no polling)."""
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            if popen is not None:
                popen.wait()
            self.on_exit(run_uuid)
            return False
        with self._watch_lock:
            self._watch[fd] = (run_uuid, popen)
        self._exited.setdefault(run_uuid, threading.Event())
        os.write(self._wake_w, b"x")
        return True

    def reaper_loop(self) -> None:
        db.connect(reuse_if_open=True)
        while not self.server.stopping.is_set():
            poller = select.poll()
            poller.register(self._wake_r, select.POLLIN)
            with self._watch_lock:
                for fd in self._watch:
                    poller.register(fd, select.POLLIN)
            for fd, _ in poller.poll(5000):
                if fd == self._wake_r:
                    os.read(self._wake_r, 4096)
                    continue
                with self._watch_lock:
                    run_uuid, popen = self._watch.pop(fd)
                os.close(fd)
                if popen is not None:
                    popen.wait()  # our child: reap it
                try:
                    self.on_exit(run_uuid)
                except Exception:
                    log.exception("recording the end of run %s failed", run_uuid)

    def on_exit(self, run_uuid: str) -> None:
        run = LoopRun.get_or_none(LoopRun.uuid == run_uuid)
        if run is None:
            return
        state = runs.read_state(run.loop, run.run_id)
        if state is not None and state.get("exit_code") is None and run.status in RUN_ACTIVE:
            # the supervisor died without recording: its command may still run
            runs.signal_group(run, 9)
        runs.record_exit(run_uuid, state, self.clock())
        ev = self._exited.get(run_uuid)
        if ev is not None:
            ev.set()
        if run.status != "stopping":  # else the stop path still waits on it (and drops it)
            self._exited.pop(run_uuid, None)
        self._after_end(run.loop)

    def _after_end(self, loop_uuid: str) -> None:
        runs.prune_logs(loop_uuid, int(self.config.get("loops.keep_runs")))
        loop = Loop.get_or_none(Loop.uuid == loop_uuid)
        if loop is not None and loop.status == "paused":
            n = (
                LoopRun.select()
                .where((LoopRun.loop == loop_uuid) & (LoopRun.status == "pending"))
                .count()
            )
            if n:
                with db.atomic("IMMEDIATE"):
                    events.emit("loop.paused_hold", loop=loop_uuid, name=loop.name, pending=n)
        self.start_pending(loop_uuid)
        self.server.notify(queue=False)
        self.wake()

    # -- stop and timeout ------------------------------------------------------
    def stop_run(self, run_uuid: str, reason: str = "stopped", wait: bool = False) -> str:
        """``loop run stop`` and ``--timeout``: one path. Returns what happened."""
        now = self.clock()
        with db.atomic("IMMEDIATE"):
            run = LoopRun.get_or_none(LoopRun.uuid == run_uuid)
            if run is None:
                return "not_found"
            if run.status == "pending":
                runs.set_status(run, "canceled", now, note={"why": reason})
                return "canceled"
            if run.status == "running":
                LoopRun.update(stop_reason=reason).where(LoopRun.uuid == run.uuid).execute()
                runs.set_status(run, "stopping", now, stop_reason=reason)
            elif run.status != "stopping":
                return run.status
        with self._stop_lock:
            if run_uuid in self._stopping:
                return "stopping"
            self._stopping.add(run_uuid)
        t = threading.Thread(target=self._stop, args=(run_uuid,), name="orcr-stop", daemon=True)
        t.start()
        if wait:
            t.join()
        self.server.notify(queue=False)
        return "stopping"

    def _stop(self, run_uuid: str) -> None:
        db.connect(reuse_if_open=True)
        try:
            self._stop_steps(run_uuid)
        except Exception:
            log.exception("stopping run %s failed", run_uuid)
        finally:
            with self._stop_lock:
                self._stopping.discard(run_uuid)

    def _stop_steps(self, run_uuid: str) -> None:
        run = LoopRun.get_by_id(run_uuid)
        loop = Loop.get_by_id(run.loop)
        exited = self._exited.setdefault(run_uuid, threading.Event())
        grace = self.config.duration("timings.stop_grace")
        alive = runs.identity_ok(*runs.process_of(run)[::2])
        if alive and runs.signal_group(run, 15):
            self._emit(run, "run.signal", signal="TERM")
            if not exited.wait(grace) and runs.signal_group(run, 9):
                self._emit(run, "run.signal", signal="KILL")
            exited.wait(10.0)
        elif not alive and run.exit_code is None:
            pid, _, start = runs.process_of(run)
            self._emit(
                run,
                "run.dead",
                pid=pid,
                why="no process with the recorded pid and start time; nothing signalled",
            )
        killed = runs.glob_kill(self.server, loop.name, run.run_id)
        with db.atomic("IMMEDIATE"):
            run = LoopRun.get_by_id(run_uuid)
            if run.status == "stopping":
                runs.set_status(
                    run, run.stop_reason or "stopped", self.clock(), note={"agents_killed": killed}
                )
        self._exited.pop(run_uuid, None)
        self._after_end(loop.uuid)

    def _emit(self, run: LoopRun, kind: str, **data) -> None:
        with db.atomic("IMMEDIATE"):
            events.emit(kind, loop=run.loop, run=run.uuid, run_id=run.run_id, **data)
        self.server.notify(queue=False)

    def close(self) -> None:
        with self._spare_lock:
            spares, self._spares = self._spares, []
        for spare in spares:
            spare.stdin.close()  # EOF: a spare with no work exits
            try:
                spare.wait(2)
            except subprocess.TimeoutExpired:
                spare.kill()
