"""The stop path (``loop run stop`` and ``--timeout``) and ending a run's agents.

A run's agents end with the run, whatever ended it: the stop path, a timeout,
its command's own exit (``ok`` or ``failed``), a supervisor that died, or a
restart that found the run dead. Each glob-kills ``<loop>/<run_id>/**`` and
looks again until a final snapshot of the store shows none; there is no give-up
time. An agent that cannot be ended (the multiplexer does not answer its close)
is named with why in a ``run.agents_remain`` row, and a stopping run stays
``stopping`` until it is gone. A loop created with ``--keep-agents`` lets the
agents of a run that exited by itself live on (stop, timeout and a dead run
still end them).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from orcr_core.loops import runs
from orcr_core.store import events
from orcr_core.store.models import Agent, Loop, LoopRun, db

if TYPE_CHECKING:
    from orcr_core.config import Config
    from orcr_core.server.context import ServerContext

log = logging.getLogger("orcr.loops")

#: after this long with agents still there, say which and why and keep going
#: (the stop path uses timings.stop_grace, at least a second)
REPORT_AFTER = 10.0
#: how many agent paths an event row lists (the count is always whole)
LIST_MAX = 50
_WHY = {
    "kill_requested": "the multiplexer did not answer its close; orcr retries",
    "cancel_requested": "still starting; it is canceled when its start step ends",
}


def agents_under(prefix: str) -> list[Agent]:
    return list(
        Agent.select().where((Agent.status != "ended") & Agent.path.startswith(prefix + "/"))
    )


def glob_kill(
    server: ServerContext, prefix: str, on_remain=None, report_after: float = REPORT_AFTER
):
    """Kill ``<prefix>/**`` until a snapshot shows none. Returns (paths asked to
    end, done); ``done`` is False only when the server stopped first (recovery
    takes over). ``on_remain(rows)`` is called once when agents outlast
    ``report_after``."""
    from orcr_core.agents import pipeline

    asked: dict[str, tuple[float, str]] = {}
    killed: list[str] = []
    t0 = time.monotonic()
    reported = False
    while True:
        rows = agents_under(prefix)
        if not rows:
            return killed, True
        now = time.monotonic()
        for agent in rows:
            last = asked.get(agent.uuid)
            retry = last is not None and last[1] == "kill_requested" and now - last[0] > 1.0
            if last is None or retry or agent.status in ("queued", "lost"):
                try:
                    result = pipeline.request_kill(server, agent).get("result", "")
                except Exception as exc:  # one agent's failure must not stop the barrier
                    log.exception("ending %s failed", agent.path)
                    result = f"error: {exc}"
                asked[agent.uuid] = (now, result)
                if last is None:
                    killed.append(agent.path)
        server.notify()
        if not reported and on_remain is not None and now - t0 > report_after:
            reported = True
            on_remain(
                [
                    {
                        "path": a.path,
                        "status": a.status,
                        "why": _WHY.get(
                            asked.get(a.uuid, (0, ""))[1], asked.get(a.uuid, (0, "?"))[1]
                        ),
                    }
                    for a in rows
                ]
            )
        if server.stopping.is_set():
            return killed, False
        time.sleep(0.05 if now - t0 < report_after else 0.5)


class Stopper:
    """The stop path and the end of a run's agents: a part of the Scheduler
    (``scheduler.stops``), not a mixin. It sees the server, the clock, and
    ``after_end(loop_uuid)`` (the scheduler's next step once a run has ended); the
    reaper tells it of a supervisor's exit through ``expect_exit``/``exited``.
    """

    def __init__(
        self,
        server: ServerContext,
        clock: Callable[[], float],
        after_end: Callable[[str], None],
    ) -> None:
        self.server = server
        self.clock = clock
        self._after_end = after_end
        self._exited: dict[str, threading.Event] = {}  # run uuid -> its supervisor exited
        self._stopping: dict[str, threading.Thread] = {}  # run uuid -> its stop path
        self._stop_lock = threading.Lock()

    @property
    def config(self) -> Config:
        return self.server.config

    def expect_exit(self, run_uuid: str) -> None:
        """A supervisor runs for ``run_uuid``: the stop path may wait for its exit."""
        self._exited.setdefault(run_uuid, threading.Event())

    def exited(self, run_uuid: str, stopping: bool) -> None:
        """The reaper saw the run's supervisor exit; forgotten at once unless the
        run is ``stopping`` (its stop path still waits on it, and drops it)."""
        ev = self._exited.get(run_uuid)
        if ev is not None:
            ev.set()
        if not stopping:
            self._exited.pop(run_uuid, None)

    def stop_run(self, run_uuid: str, reason: str = "stopped", wait: bool = False) -> str:
        """``loop run stop`` and ``--timeout``: one path. Returns what happened:
        ``canceled``, ``stopping`` (under way), or the run's final status when
        ``wait`` saw it end."""
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
            t = self._stopping.get(run_uuid)
            if t is None:
                t = threading.Thread(
                    target=self._stop, args=(run_uuid,), name="orcr-stop", daemon=True
                )
                self._stopping[run_uuid] = t
                t.start()
        self.server.notify(queue=False)
        if not wait:
            return "stopping"
        t.join()
        return LoopRun.get_by_id(run_uuid).status

    def _stop(self, run_uuid: str) -> None:
        db.connect(reuse_if_open=True)
        try:
            self._stop_steps(run_uuid)
        except Exception:
            log.exception("stopping run %s failed", run_uuid)
        finally:
            with self._stop_lock:
                self._stopping.pop(run_uuid, None)

    def _stop_steps(self, run_uuid: str) -> None:
        run = LoopRun.get_by_id(run_uuid)
        loop = Loop.get_by_id(run.loop)
        exited = self._exited.setdefault(run_uuid, threading.Event())
        grace = self.config.duration("timings.stop_grace")
        alive = runs.identity_ok(*runs.process_of(run)[::2])
        why = "timeout" if run.stop_reason == "timeout" else "loop run stop"
        if alive and runs.signal_group(run, 15, why=why):
            self.server.notify(queue=False)
            if not exited.wait(grace) and runs.signal_group(
                run, 9, why="still running after timings.stop_grace"
            ):
                self.server.notify(queue=False)
            exited.wait(10.0)
        elif not alive and run.exit_code is None:
            pid, _, _start = runs.process_of(run)
            self._emit(
                run,
                "run.dead",
                pid=pid,
                why="no process with the recorded pid and start time; nothing signalled",
            )
        killed, done = self.end_agents(run, loop, why, stopping=True)
        if not done:
            return  # the server is stopping: the run stays stopping, recovery resumes it
        with db.atomic("IMMEDIATE"):
            run = LoopRun.get_by_id(run_uuid)
            if run.status == "stopping":
                runs.set_status(
                    run,
                    run.stop_reason or "stopped",
                    self.clock(),
                    note={"agents_killed": len(killed)},
                    error=None,
                )
        self._exited.pop(run_uuid, None)
        self._after_end(loop.uuid)

    def end_agents(self, run: LoopRun, loop: Loop, why: str, stopping: bool = False):
        """Glob-kill the run's agents until none is left; a ``run.agents_killed``
        row says which were ended. Returns (paths, done)."""
        prefix = f"{loop.name}/{run.run_id}"

        def remain(rows: list[dict]) -> None:
            names = ", ".join(f"{r['path']} ({r['status']}: {r['why']})" for r in rows[:5])
            with db.atomic("IMMEDIATE"):
                if stopping:
                    LoopRun.update(error=f"waiting for its agents to end: {names}").where(
                        LoopRun.uuid == run.uuid
                    ).execute()
                events.emit(
                    "run.agents_remain",
                    loop=run.loop,
                    run=run.uuid,
                    run_id=run.run_id,
                    count=len(rows),
                    agents=rows[:LIST_MAX],
                )
            self.server.notify(queue=False)

        report_after = max(self.config.duration("timings.stop_grace"), 1.0)
        killed, done = glob_kill(self.server, prefix, on_remain=remain, report_after=report_after)
        if killed:
            self._emit(
                run,
                "run.agents_killed",
                count=len(killed),
                agents=killed[:LIST_MAX],
                why=why,
            )
        return killed, done

    def after_exit(self, run: LoopRun) -> None:
        """A run ended by its command's exit (or its supervisor's death): end its
        agents on a thread of their own, unless the loop keeps them."""
        loop = Loop.get_or_none(Loop.uuid == run.loop)
        if loop is None:
            return
        run = LoopRun.get_by_id(run.uuid)
        exited = run.status in ("ok", "failed") and run.exit_code is not None
        if loop.keep_agents and exited:
            return
        why = "the run's command exited" if exited else f"the run ended {run.status}"

        def work() -> None:
            db.connect(reuse_if_open=True)
            try:
                self.end_agents(run, loop, why)
            except Exception:
                log.exception("ending the agents of run %s failed", run.uuid)

        threading.Thread(target=work, name="orcr-run-agents", daemon=True).start()

    def _emit(self, run: LoopRun, kind: str, **data) -> None:
        with db.atomic("IMMEDIATE"):
            events.emit(kind, loop=run.loop, run=run.uuid, run_id=run.run_id, **data)
        self.server.notify(queue=False)
