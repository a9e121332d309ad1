"""The server: owns the store, the queue worker, the monitor and the socket.

Threads, not asyncio: every store write is a short synchronous SQLite
transaction, multiplexer calls block, and peewee connections are per thread.
The queue worker sleeps on the bus and wakes on admissions, freed slots and
config changes; it never polls.
"""

from __future__ import annotations

import gc
import logging
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from orcr_core import ceilings, dirs
from orcr_core import config as config_mod
from orcr_core.agents import memory, queue
from orcr_core.ceilings import pressure
from orcr_core.common import clock
from orcr_core.config import watch as config_watch
from orcr_core.contracts import Driver
from orcr_core.pm.plugins import Registry, build_registry, get_plugin_manager
from orcr_core.server import lockfile
from orcr_core.server import status as server_status
from orcr_core.server.multiplexer import Multiplexer
from orcr_core.store import events, faults, health
from orcr_core.store.db import open_store
from orcr_core.store.events import Bus
from orcr_core.store.models import LIVE, Agent, db
from orcr_core.usage import budgets
from orcr_core.usage_limits import Limits

if TYPE_CHECKING:
    from orcr_core.loops.scheduler import Scheduler
    from orcr_core.notify.outbox import Notifier

log = logging.getLogger("orcr.server")

MEMORY_RECHECK = 1.0  # seconds between readings while promotion is held (memory, multiplexer)


class AlreadyRunning(Exception):
    pass


class Server:
    def __init__(self, cfg: config_mod.Config | None = None, registry: Registry | None = None):
        self.config = cfg or config_mod.load()
        self.registry = registry or build_registry(get_plugin_manager())
        self.registry.timeouts["provider_call"] = self.config.duration("timings.provider_call")
        self.store_path = dirs.store_path()
        self.agents_dir = dirs.agents_dir()
        self.socket_path = dirs.socket_path()
        self.bus = Bus()  # event rows for watchers
        self.queue_bus = Bus()  # work for the queue worker
        self.stopping = threading.Event()
        self.started_at = time.time()
        self.pool = ThreadPoolExecutor(max_workers=32, thread_name_prefix="orcr-pipe")
        self.held: str | None = None  # why promotion waits (multiplexer, memory), for status/get
        self.memory = memory.Ledger()  # footprints, estimates, reservations (agents/memory.py)
        self.usage_limits = Limits()  # agents waiting out a usage limit (orcr_core/usage_limits)
        #: the driver, whether it answers, its event stream (server/multiplexer.py)
        self.mux = Multiplexer(lambda: self.config, self.registry, self.stopping)
        self._active_pipelines: set[str] = set()
        self._waiting: dict[str, list] = {}
        self.exited_panes: dict[str, float] = {}  # pane id -> when the multiplexer said so
        self.lost_at: dict[str, float] = {}  # agent uuid -> when it was first seen lost
        #: blocked agents: when their screen was last re-checked (monotonic)
        self.dialog_checked: dict[str, float] = {}
        self.transcript_readers: dict = {}  # each agent's reader (agents/transcripts.py)
        self.notify_tests: dict[str, dict] = {}  # each sink's last ``notify test`` result
        self._pipe_lock = threading.Lock()
        self._lock_fd = -1  # the lock file's descriptor, once acquire_lock took it
        self.failure: str | None = None  # why serve() stopped other than on request
        self.store_broken: str | None = None  # the store file is damaged (store/health.py)
        self._store_lock = threading.Lock()
        self.threads: list[threading.Thread] = []
        self.loops: Scheduler | None = None  # the loop scheduler, made in serve()
        self.notifier: Notifier | None = None  # notifications (notify/outbox.py), in serve()
        self._config_lock = threading.Lock()
        #: an edit of the config file that was not applied: {"error", "since"} (config/watch.py)
        self.config_error: dict | None = None
        from orcr_core.agents.monitor import Monitor
        from orcr_core.server.agent_sockets import AgentSockets

        self.monitor = Monitor(self)
        self.agent_sockets = AgentSockets(self)  # each sandboxed agent's own socket

    @property
    def driver(self) -> Driver | None:
        """The multiplexer driver, made on first use (None when none can run)."""
        return self.mux.driver

    # -- plumbing ---------------------------------------------------------
    def acquire_lock(self) -> None:
        dirs.ensure_private_dir(dirs.run_dir())
        fd = lockfile.acquire(lockfile.path())
        if fd is None:
            raise AlreadyRunning(f"an orcr server already runs on {self.store_path}")
        self._lock_fd = fd

    def watch_run_dir(self, listener) -> None:
        """Keep the lock file and the socket in place while the server runs.

        Deleting ``run/orcr.sock`` (or all of ``run/``) must not strand the server:
        its socket is recreated, and a deleted lock file is re-created and taken
        again, so a second server can never start beside this one. If another
        process took the new lock first, this server stops.
        """
        lock = lockfile.path()
        while not self.stopping.wait(0.5):
            try:
                if not lockfile.is_current(self._lock_fd, lock):
                    dirs.ensure_private_dir(lock.parent)
                    fd = lockfile.acquire(lock)
                    if fd is None:
                        self.failure = f"another orcr server took the lock file {lock}"
                        log.error("%s; stopping", self.failure)
                        self.stop()
                        return
                    os.close(self._lock_fd)
                    self._lock_fd = fd
                    log.warning("lock file %s was gone; took it again", lock)
                    lockfile.mark_listening(fd, self.socket_path)
                listener.check()
                why = health.file_problem(self.store_path, running=True)
                if why:
                    self.store_failed(why)
                    return
            except OSError as exc:
                log.warning("cannot restore the run directory: %s", exc)

    def store_error(self, exc: BaseException) -> bool:
        """True (and the server stops) when ``exc`` says the store file is damaged."""
        why = health.corruption(exc) or health.file_problem(self.store_path, running=True)
        if why is None:
            return False
        self.store_failed(why)
        return True

    def store_failed(self, why: str) -> None:
        """The store is damaged under the server: say so once and stop serving.

        Every request from now on is refused ``store_corrupted`` at once, and the
        process exits (``serve``) without closing its store connections, so
        SQLite checkpoints nothing into the damaged file and the -wal stays for
        a salvage. A new server refuses to start over the file (``open_store``).
        """
        with self._store_lock:
            if self.store_broken:
                return
            self.store_broken = why
            self.failure = (
                f"the store is damaged: {why}; the server stops (agents keep running in their "
                f"panes); {health.what_to_do(self.store_path)}"
            )
        log.error("store_corrupted: %s", self.failure)
        self.stop()

    def notify(self, queue: bool = True) -> None:
        """Wake watchers (new event rows), and the queue worker unless ``queue`` is
        False: an admission while every slot is taken cannot promote anything."""
        self.bus.notify()
        if queue:
            self.queue_bus.notify()
        self.monitor.poke()

    def reload_config(self, source: str = "reload") -> dict[str, list]:
        """Read the config file again (``source``: reload, edit); ``{key: [old, new]}``.

        An invalid file raises ConfigError and changes nothing: the last good
        configuration stays in force, and why is kept for ``server status`` and
        ``doctor``, logged, and recorded once as a ``config.invalid`` event.
        """
        from orcr_core.config.watch import changes

        with self._config_lock:
            try:
                new = config_mod.load()
                changed = changes(self.config.data, new.data)
                config_watch.refuse_mux_switch(changed, self._live_or_lost())
            except config_mod.ConfigError as exc:
                if self.config_error is None or self.config_error["error"] != str(exc):
                    self.config_error = {"error": str(exc), "since": time.time()}
                    log.error("config not applied (%s), the last good one stays: %s", source, exc)
                    with db.atomic():
                        events.emit("config.invalid", error=str(exc), source=source)
                    self.notify(queue=False)
                raise
            self.config, self.config_error = new, None
            self.registry.timeouts["provider_call"] = new.duration("timings.provider_call")
            if any(k.split(".")[0] in ("driver", "herdr", "tmux") for k in changed):
                self.mux.reset()
            if self.notifier is not None:
                self.notifier.reconfigure()
            if changed:
                self.monitor.rearm()  # GC, guard, park and stall deadlines follow the config
                log.info("config applied (%s): %s", source, ", ".join(changed))
                with db.atomic():
                    events.emit("config.applied", changed=changed, source=source)
            self.notify()
            return changed

    # -- threads ----------------------------------------------------------
    def queue_worker(self) -> None:
        from orcr_core.agents import pipeline

        db.connect(reuse_if_open=True)
        while not self.stopping.is_set():
            try:
                step = self._queue_step(pipeline)
            except Exception as exc:  # never a dead queue thread (issue 33 item 15)
                if self.store_error(exc):  # a damaged store: said once, by the server
                    return
                log.exception("queue pass failed; retrying")
                self.stopping.wait(1.0)
                continue
            if step is not None:
                self.queue_bus.wait(step[0], timeout=step[1])

    def _queue_step(self, pipeline) -> tuple[int, float | None] | None:
        """One pass: promote what may start; None to look again at once, else the
        bus generation and the timeout to wait with."""
        gen = self.queue_bus.generation()
        promoted, gate = [], None
        if self.driver is not None:
            faults.point("before_promote")
            # the multiplexer first: a promotion into a dead one would only fail
            queued = queue.any_queued()
            self.held = self.mux.ready() if queued else None
            if queued and self.held is None:
                self.held = pressure.held(self.config)  # PSI first (ceilings/pressure.py)
            if queued and self.held is None:
                # promoted-but-loading agents reserve their footprint first
                budget = self.memory.budget(self, self.config)
                gate = budgets.gate(self)  # token budgets (usage/budgets.py)
                limited = self.usage_limits.held(self)  # a provider waiting out a usage limit
                providers = set(self.registry.providers) - set(limited)
                promoted = queue.promote(self.config, budget=budget, gate=gate, providers=providers)
                self.held = budget.held() if budget is not None else None
        elif queue.any_queued():
            self.held = self.mux.ready()
        if promoted:
            faults.point("after_promote")
            self.notify()
            for agent in promoted:
                self.start_pipeline(agent.uuid, pipeline.run)
            return None
        timeout: float | None
        if self.held:  # memory frees, a multiplexer comes back, without an event
            timeout = MEMORY_RECHECK
        else:
            timeout = 5.0 if not self.mux.made else None
        if wake := gate and gate.wake_at():  # a spent budget's window rolls over
            timeout = max(0.05, min(timeout or 3600.0, wake - clock.time()))
        if wake := self.usage_limits.wake_at():  # a usage limit's reset
            timeout = max(0.05, min(timeout or 3600.0, wake - clock.time()))
        return gen, timeout

    def start_pipeline(self, uuid: str, fn, *args, queue_behind: bool = False) -> None:
        """Run ``fn(self, uuid, *args)`` on the pool, one job per agent at a time.

        A job for an agent that already has one running is dropped (the spawn
        pipeline is idempotent and resumes from the row), or with
        ``queue_behind`` runs after it: a prompt delivery must never be lost.
        """
        with self._pipe_lock:
            if uuid in self._active_pipelines:
                if queue_behind:
                    self._waiting.setdefault(uuid, []).append((fn, args))
                return
            self._active_pipelines.add(uuid)
        self.pool.submit(self._job, uuid, fn, args)

    def _job(self, uuid: str, fn, args) -> None:
        while True:
            try:
                db.connect(reuse_if_open=True)
                fn(self, uuid, *args)
            except Exception as exc:
                if not self.store_error(exc):
                    log.exception("job for agent %s failed", uuid)
            with self._pipe_lock:
                waiting = self._waiting.get(uuid)
                if not waiting:
                    self._waiting.pop(uuid, None)
                    self._active_pipelines.discard(uuid)
                    break
                fn, args = waiting.pop(0)
            self.notify()
        self.notify()

    def started_threads(self) -> bool:
        """Whether this server started any thread (a listener, a pipeline)."""
        with self._pipe_lock:
            return bool(self.threads or self._active_pipelines)

    def pipeline_active(self, uuid: str) -> bool:
        with self._pipe_lock:
            return uuid in self._active_pipelines

    @staticmethod
    def _live_or_lost() -> int:
        return Agent.select().where(Agent.status.in_((*LIVE, "lost"))).count()

    def config_watch_loop(self) -> None:
        db.connect(reuse_if_open=True)
        config_watch.follow(self, self.config.path)

    def follow_mux_events(self) -> None:
        """The multiplexer's event stream, told to the monitor (server/multiplexer.py)."""

        def exited(pane_id: str) -> None:
            self.exited_panes[pane_id] = time.time()

        self.mux.follow_events(self.monitor.pane_changed, self.monitor.events_live_changed, exited)

    def monitor_loop(self) -> None:
        db.connect(reuse_if_open=True)
        self.monitor.run()

    def status(self) -> dict:
        """The ``server.status`` answer (server/status.py)."""
        return server_status.report(self)

    def serve(self) -> None:
        """Run until ``server.stop`` or a signal. Recovery runs before the socket opens."""
        from orcr_core.agents import reconcile
        from orcr_core.server.listener import ANSWERING, Listener

        dirs.require_writable(dirs.data_dir())
        self.acquire_lock()
        open_store(self.store_path)
        dirs.ensure_private_dir(self.agents_dir.parent)
        self.agents_dir.mkdir(parents=True, exist_ok=True)
        faults.point("server_start")
        ceilings.install(ceilings.detect(self.config, dirs.instance_id()))  # before recovery
        reconcile.restart_guards()  # before the monitor can look at a starting row
        # the pipelines of repaired starts run only once recovery (agents, then
        # loops) has finished: none of their commits can meet a recovery write
        resumed = reconcile.recover(self) if self.driver is not None else []
        from orcr_core.loops import recovery
        from orcr_core.loops.scheduler import Scheduler

        self.loops = Scheduler(self)
        recovery.recover(self.loops)
        from orcr_core.notify.outbox import Notifier

        self.notifier = Notifier(self)  # pins its cursor before retention can run
        self.threads += self.notifier.start()
        # until the followers of the server before this one resubscribe and pin their
        # own cursors, retention deletes nothing (store/events.py; docs/decisions.md)
        self.bus.pin(0, time.monotonic() + self.config.duration("events.resume_grace"))
        listener = Listener(self)
        listener.bind()
        lockfile.mark_listening(self._lock_fd, self.socket_path)
        self.agent_sockets.restore()
        for target, name in (
            (listener.serve, "orcr-listen"),
            (lambda: self.watch_run_dir(listener), "orcr-run-watch"),
            (self.queue_worker, "orcr-queue"),
            (self.monitor_loop, "orcr-monitor"),
            (self.follow_mux_events, "orcr-mux-events"),
            (self.config_watch_loop, "orcr-config-watch"),
        ):
            t = threading.Thread(target=target, name=name, daemon=True)
            t.start()
            self.threads.append(t)
        self.threads += self.loops.start()
        from orcr_core.agents import delivery, pipeline

        for uuid in resumed:
            self.start_pipeline(uuid, pipeline.run)
        if self.driver is not None:  # (else the multiplexer is down: nothing can be typed)
            delivery.resume_sends(self)  # an ``agent send`` a crash interrupted
        log.info("orcr server %s listening on %s", os.getpid(), self.socket_path)
        # everything the start made (modules, the registry, config) lives as long as
        # the server: out of the cyclic GC's passes, which otherwise walk it again and
        # again for the garbage of each request (bench/lifetime.py)
        gc.freeze()
        self.stopping.wait()
        lockfile.mark_stopping(self._lock_fd)  # before the socket goes: clients wait
        listener.close()
        self.agent_sockets.close_all()
        if self.store_broken:  # no checkpoint into a damaged file, no thread's cleanup
            ANSWERING.drain(1.0)  # the request that found the damage says so
            logging.shutdown()
            os._exit(1)
        self.loops.close()
        self.notify()
        self.pool.shutdown(wait=False, cancel_futures=True)
        drop = getattr(ceilings.current().backend, "drop_fleet", None)
        if drop is not None:  # the fleet's own groups, when no agent's is left in them
            drop()

    def stop(self) -> None:
        self.stopping.set()
        if self.notifier is not None:
            self.notifier.kick()
        self.notify()
