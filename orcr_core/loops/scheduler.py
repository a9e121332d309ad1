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
from typing import TYPE_CHECKING

import psutil

from orcr_core.common import clock as _clock
from orcr_core.loops import defs, runs
from orcr_core.loops import supervisor as supervisor_mod
from orcr_core.loops.fires import fire_due
from orcr_core.loops.stopping import Stopper
from orcr_core.store import events, faults
from orcr_core.store.events import Bus
from orcr_core.store.models import RUN_ACTIVE, Loop, LoopRun, db

if TYPE_CHECKING:
    from orcr_core.server.context import ServerContext

log = logging.getLogger("orcr.loops")

MAX_WAIT = 60.0
#: warm supervisors kept waiting: a fire never waits for Python to start
SPARES = 2
_NEXT_FIRE = "SELECT MIN(next_fire_at) FROM loop WHERE status = 'active'"
_DEADLINES = (
    "SELECT MIN(r.started_at + l.timeout) FROM loop_run r JOIN loop l ON r.loop = l.uuid "
    "WHERE r.status = 'running' AND l.timeout IS NOT NULL"
)


class Scheduler:
    """The loops subsystem inside the server: timer, reaper, spare supervisor, stops."""

    def __init__(self, server: ServerContext, clock=_clock.time):
        self.server = server
        self.clock = clock
        self.bus = Bus()
        self._spares: list[subprocess.Popen] = []
        self._spare_lock = threading.Lock()
        self._watch: dict[int, tuple[str, subprocess.Popen | None]] = {}  # pidfd -> run
        self._watch_lock = threading.Lock()
        self._wake_r, self._wake_w = os.pipe()
        #: ``loop run stop``, ``--timeout`` and the end of a run's agents (stopping.py)
        self.stops = Stopper(server, clock, self._after_end)
        self.last_tick_ms: float | None = None
        self.ticks = 0
        self._last_wall: float | None = None  # the wall clock at the last tick

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
        return threads  # the first tick warms the spares, if a loop is active

    def timer_loop(self) -> None:
        db.connect(reuse_if_open=True)
        while not self.server.stopping.is_set():
            gen = self.bus.generation()
            try:
                wait = self.tick()
            except Exception as exc:
                if self.server.store_error(exc):  # a damaged store: said once, by the server
                    return
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
        prev, self._last_wall = self._last_wall, now
        runs.mark_alive()
        # a wait is capped at MAX_WAIT: a longer gap is a machine that slept
        slept = prev is not None and now - prev > MAX_WAIT + 30
        why = {"reason": "asleep", "from": prev, "to": now} if slept else None
        started = fire_due(now, self.config.duration("loops.missed_after"), why, self.clock)
        self._launch_all(started)
        if started:
            self.server.notify(queue=False)
        self._timeouts(now)
        nxt = db.execute_sql(_NEXT_FIRE).fetchone()[0]
        if nxt is not None:
            self._keep_warm()
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
            self.stops.stop_run(uuid, "timeout")

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
                        runs.set_status(run, "failed", self.clock(), error=f"launch failed: {exc}")
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

    def _keep_warm(self) -> None:
        """Warm spares while a loop is active (a tick that found one): a server with
        none, as most are, starts no Python for fires that cannot come (two
        ``python -I -S`` per server start, ~35 ms of CPU between them)."""
        if len(self._spares) < SPARES:  # the refill holds the lock: one at a time
            threading.Thread(target=self._refill_spare, name="orcr-spare", daemon=True).start()

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
        self.stops.expect_exit(run.uuid)
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
        self.stops.expect_exit(run_uuid)
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
            runs.signal_group(run, 9, why="its supervisor died without recording an exit status")
        ended = runs.record_exit(run_uuid, state, self.clock())
        if ended is not None and ended.status != "stopping":
            self.stops.after_exit(ended)  # its agents end with it
        self.stops.exited(run_uuid, stopping=run.status == "stopping")
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

    def close(self) -> None:
        runs.mark_alive()  # a clean stop: the downtime starts now
        with self._spare_lock:
            spares, self._spares = self._spares, []
        for spare in spares:
            spare.stdin.close()  # EOF: a spare with no work exits
            try:
                spare.wait(2)
            except subprocess.TimeoutExpired:
                spare.kill()
