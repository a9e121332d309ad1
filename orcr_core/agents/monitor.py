"""The monitor: turns from transcripts, panes from the multiplexer, timers.

Working and idle come from the provider's transcript, never the screen; the
multiplexer's agent state is used only for providers without a transcript.

Event-driven, so an idle fleet costs next to nothing: transcript growth comes
from filesystem notifications (:mod:`orcr_core.agents.fswatch`), pane changes
from the multiplexer's own event stream, and every clock (stuck-start guard,
turn timeout, GC, park, the stalled flag) from one heap of deadlines (:mod:`orcr_core.agents.timers`)
computed from persisted timestamps, so a restart neither resets nor skips one.
Notifications are hints, never the truth: each one makes the monitor read the
transcript or take a snapshot and compare. What cannot be notified is polled
every ``timings.poll_every`` (agents starting, working or lost, transcripts
with no watch, and every pane while the driver has no live event stream), and
every ``timings.reconcile_every`` the reconciler's full pass re-reads every
transcript and snapshot as a safety net. Nothing is written unless something
changed: a steady fleet costs no write transaction at all. A working agent
whose transcript went quiet has its screen read for a question asked mid-turn
(:mod:`orcr_core.agents.asking`).
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from orcr_core.agents import (
    delivery,
    lifecycle,
    panes,
    parking,
    pipeline,
    stall,
    transcripts,
    turns,
)
from orcr_core.agents.active_rows import ActiveRows
from orcr_core.agents.fswatch import TranscriptWatcher
from orcr_core.agents.launch import pane_of
from orcr_core.agents.timers import Timers
from orcr_core.agents.witness import Witness
from orcr_core.common import clock
from orcr_core.contracts import DriverError, ProviderError, ProviderFault
from orcr_core.store import events
from orcr_core.store.models import Agent, db
from orcr_core.workspaces import finish as workspace_finish

if TYPE_CHECKING:
    from orcr_core.server.context import ServerContext

log = logging.getLogger("orcr.monitor")

#: seconds between re-checks of a blocked agent's screen (is the dialog answered?)
DIALOG_RECHECK = 0.5
MONITORED = ("starting", "working", "idle", "lost")


class Monitor:
    """The monitor thread's state: the active rows, the wakeup hints, the timers."""

    def __init__(self, server: ServerContext):
        self.server = server
        self._cond = threading.Condition()
        self._dirty: set[str] = set()  # agents whose transcript may have grown
        self._everything = True  # visit every agent (start, overflow, reconcile)
        self._panes_hint = True  # a pane may have changed: take a snapshot
        self._reload = True
        self._rearm_all = True  # the next reload re-arms every row's timers
        self.agents: dict[str, Agent] = {}
        self._fast: set[str] = set()  # visited every poll_every
        self._snapshot_polling = True
        self._writes_seen = -1
        self.rows = ActiveRows()  # the rows as last read: which moved since
        self.retention = events.RetentionPasses()
        self._next_poll = 0.0
        self._next_reconcile = 0.0
        self.timers = Timers()
        self._stall_at: dict[str, float] = {}  # the stall deadline armed per agent
        self.watcher = TranscriptWatcher(self.transcript_changed)
        self.counters = {"snapshots": 0, "steps": 0}
        self.witness = Witness()  # the multiplexer's view of turn ends, beside the transcript
        self._witness_polling = False  # snapshots polled only for a pending witness
        #: set once the first step has read every agent's transcript (budgets wait for it)
        self.first_pass = threading.Event()

    # -- hints, from any thread -------------------------------------------
    def poke(self) -> None:
        """Something was written: re-read the active rows."""
        with self._cond:
            self._reload = True
            self._cond.notify()

    def rearm(self) -> None:
        """The configuration changed: every row's timers are armed again."""
        with self._cond:
            self._reload = self._rearm_all = True
            self._cond.notify()

    def transcript_changed(self, uuid: str | None) -> None:
        with self._cond:
            if uuid is None:
                self._everything = True
            else:
                self._dirty.add(uuid)
            self._cond.notify()

    def pane_changed(self) -> None:
        """The multiplexer said a pane may have changed: snapshot and compare."""
        with self._cond:
            self._panes_hint = True
            self._cond.notify()

    def status(self) -> dict:
        """For ``server status``: how the monitor learns things right now."""
        watched = self.watcher.count()
        return {
            "transcripts_notified": watched,
            "transcripts_polled": sum(
                1 for u in list(self._fast) if u in self.agents and not self.watcher.watched(u)
            ),
            "notifications": "inotify" if self.watcher.available else "off",
            "notifications_error": self.watcher.error,
            "pane_events": self.server.mux.events_live,
            # pane event streams that lost events and were resubscribed (herdr 0.9.2+)
            "resyncs": self.server.mux.resyncs,
            "timers": len(self.timers),
            "snapshots": self.counters["snapshots"],
            "turn_witness": dict(self.witness.counts),  # agents/witness.py
        }

    # -- the thread -------------------------------------------------------
    def run(self) -> None:
        srv = self.server
        self.watcher.start()
        while not srv.stopping.is_set():
            with self._cond:
                timeout = self._timeout()
                if timeout > 0 and not (
                    self._dirty or self._everything or self._panes_hint or self._reload
                ):
                    self._cond.wait(min(timeout, 3600.0))
                dirty, self._dirty = self._dirty, set()
                everything, self._everything = self._everything, False
                panes_hint, self._panes_hint = self._panes_hint, False
                reload, self._reload = self._reload, False
            if srv.stopping.is_set():
                break
            try:
                self.step(dirty, everything, panes_hint, reload)
                self.first_pass.set()
            except Exception as exc:
                if srv.store_error(exc):
                    break
                log.exception("monitor step failed")
                with self._cond:
                    self._reload = self._rearm_all = True
                srv.stopping.wait(srv.config.duration("timings.poll_every"))
        self.watcher.stop()

    def _timeout(self) -> float:
        now = clock.monotonic()
        candidates = [self._next_reconcile - now]
        if self._fast or (self._snapshot_polling and self.agents):
            candidates.append(self._next_poll - now)
        at = self.timers.next_at()
        if at is not None:
            candidates.append(at - clock.time())
        return max(0.0, min(candidates))

    def step(self, dirty: set[str], everything: bool, panes_hint: bool, reload: bool) -> None:
        srv = self.server
        cfg = srv.config
        self.counters["steps"] += 1
        srv.mux.ready()  # keeps orcr's own multiplexer running, queue or not
        now_m = clock.monotonic()
        if now_m >= self._next_reconcile and srv.driver is not None:
            from orcr_core.agents import reconcile

            reconcile.run(srv)
            self._next_reconcile = now_m + cfg.duration("timings.reconcile_every")
            everything = panes_hint = reload = True
        poll_due = now_m >= self._next_poll
        if poll_due:
            self._next_poll = now_m + cfg.duration("timings.poll_every")
        if reload or db.write_transactions != self._writes_seen:
            rearm, self._rearm_all = self._rearm_all or everything, False
            self._load(rearm)
            workspace_finish.sweep(srv)  # an agent that ended keeps or removes its checkout
        if self.agents and (panes_hint or (poll_due and self._snapshot_polling)):
            self.counters["snapshots"] += 1
            panes.observe(srv, list(self.agents.values()))
            if self._snapshot_polling and self._witness_polling and not self.witness.pending():
                self._classify()  # a turn end witnessed (or not) in time: polling may stop
        now = clock.time()
        due: set[str] = set()
        stall_due: set[str] = set()
        for uuid, kind in self.timers.due(now):
            if kind == "lost":
                self.pane_changed()  # confirm a loss with one following snapshot
            else:
                due.add(uuid)
                if kind == "stall":
                    stall_due.add(uuid)
                    self._stall_at.pop(uuid, None)
        visit = (
            set(self.agents) if everything else dirty | due | (self._fast if poll_due else set())
        )
        for uuid in visit:
            agent = self.agents.get(uuid)
            if agent is None:
                continue
            try:
                _agent(srv, agent, now)
            except ProviderFault as exc:  # its adapter broke: it ends, the others go on
                log.warning("agent %s: %s", agent.path, exc)
                pipeline.end(srv, agent, "failed", error=str(exc))
            except (DriverError, ProviderError) as exc:
                log.warning("agent %s: %s", agent.path, exc)
            self._watch(agent)
            if uuid in due:
                self._arm(agent)  # a deadline met to the millisecond comes round again
            self._arm_stall(agent, retry=uuid in stall_due)  # its transcript may be found now
        if db.write_transactions != self._writes_seen:
            with self._cond:
                self._reload = True  # this step wrote: re-read the rows, re-arm their timers
        self.retention.after_step(  # after a write, or once a pin has moved
            srv.bus,
            db.write_transactions,
            int(cfg.get("events.retention")),
            int(cfg.get("loops.keep_events")),
        )

    # -- rows, watches, timers --------------------------------------------
    def _load(self, rearm_all: bool = True) -> None:
        """Re-read the active rows (only after some write: none while the fleet is steady).

        Only the rows that moved are made again (:class:`ActiveRows`); the others keep
        their objects, and their timers stay as armed, unless ``rearm_all`` (a
        reconciliation pass, a config change, the first load). At 250 agents, making
        every row again and re-arming every timer after each write was most of a turn
        end's latency (bench/idle.py)."""
        self._writes_seen = db.write_transactions
        sql, params, fields = Agent.compiled(
            "monitored", lambda: Agent.select().where(Agent.status.in_(MONITORED))
        )  # after every write: compiled once (bench/lifetime.py)
        old = self.agents
        rows, changed = self.rows.read(sql, params, fields, old)
        for agent in changed:
            uuid = agent.uuid
            before = old.get(uuid)
            if before is None or (before.status, before.turn, before.agent_session_value) != (
                agent.status,
                agent.turn,
                agent.agent_session_value,
            ):
                with self._cond:
                    self._dirty.add(uuid)  # a new state: read its transcript once now
            if before is not None and hasattr(before, "_mux_status"):
                agent._mux_status = before._mux_status
        for uuid in old.keys() - rows.keys():
            self.rows.drop(uuid)
            self.watcher.unwatch(uuid)
            self.server.lost_at.pop(uuid, None)
            self._stall_at.pop(uuid, None)
            self.server.dialog_checked.pop(uuid, None)
        self.agents = rows
        if len(rows) != len(old) or changed:
            transcripts.forget_except(self.server, set(rows))
            self.timers.forget(set(rows))
            self.witness.forget(set(rows))
        for agent in rows.values() if rearm_all else changed:
            self._arm(agent)
        self._classify()

    def _arm(self, agent: Agent) -> None:
        cfg = self.server.config
        if agent.status == "starting" and agent.blocked_reason:
            at = (agent.blocked_at or clock.time()) + cfg.duration("timings.dialog_wait")
            self.timers.arm(at, agent.uuid, "guard")
        elif agent.status == "starting":
            start = agent.last_progress_at or agent.started_at or clock.time()
            self.timers.arm(start + cfg.duration("timings.max_starting"), agent.uuid, "guard")
        elif agent.status == "working" and agent.timeout and agent.turn_started_at:
            self.timers.arm(agent.turn_started_at + agent.timeout, agent.uuid, "timeout")
        elif agent.status == "idle" and agent.idle_since:
            self.timers.arm(agent.idle_since + gc_after(cfg, agent), agent.uuid, "gc")
            park_at = parking.due_at(self.server, agent)
            if park_at is not None:
                self.timers.arm(park_at, agent.uuid, "park")
        self._arm_stall(agent)

    def _arm_stall(self, agent: Agent, retry: bool = False) -> None:
        """One timer per working agent at its last transcript growth + stall_after.

        Growth is not a write, so it does not move the timer at once: the armed
        entry fires at the old deadline, the visit finds the later growth and
        arms the new one (one heap entry per agent, however often it writes).
        """
        at = stall.deadline(self.server, agent)
        if at is None:
            self._stall_at.pop(agent.uuid, None)
            return
        if retry and at <= clock.time():
            at = clock.time() + 1.0  # due but not flagged (its visit ended early): retry
        armed = self._stall_at.get(agent.uuid)
        if armed is not None and armed <= at:
            return  # an earlier entry fires first and arms this one then
        self._stall_at[agent.uuid] = at
        self.timers.arm(at, agent.uuid, "stall")

    def _watch(self, agent: Agent) -> None:
        """Watch the agent's transcript once its reader exists (then read it once more:
        what was written before the watch was added has no notification)."""
        if agent.uuid not in self.agents or self.watcher.watched(agent.uuid):
            return
        path = transcripts.path_of(self.server, agent.uuid)
        if not path:
            return
        if self.watcher.watch(agent.uuid, path):
            with self._cond:
                self._dirty.add(agent.uuid)
            self._classify()
        elif agent.uuid not in self._fast:
            self._classify()  # its watch was lost (the directory went away): poll it

    def _classify(self) -> None:
        """Which agents are polled every poll_every, and whether panes are."""
        providers = self.server.registry.providers
        fast = set()
        panes = not self.server.mux.events_live
        for uuid, agent in self.agents.items():
            provider = providers.get(agent.provider)
            no_transcript = provider is not None and not provider.has_transcript
            if (
                agent.status in ("starting", "working", "lost")
                or agent.cancel_requested
                or no_transcript
                or (provider is not None and not self.watcher.watched(uuid))
            ):
                fast.add(uuid)
            if agent.status in ("starting", "lost") or no_transcript:
                panes = True
        self._fast = fast
        self._witness_polling = not panes and self.witness.pending()
        self._snapshot_polling = panes or self._witness_polling

    def events_live_changed(self) -> None:
        """The multiplexer's event stream came up or went down."""
        self._classify()
        self.pane_changed()


def gc_after(cfg, agent: Agent) -> float:
    """How long ``agent`` may sit idle before it ends ``gc``: its own ``--gc-after``,
    else ``timings.gc_after``."""
    own = getattr(agent, "gc_after", None)
    return own if own is not None else cfg.duration("timings.gc_after")


def _agent(server: ServerContext, agent: Agent, now: float) -> None:
    cfg = server.config
    if agent.status == "starting":
        guard = cfg.duration("timings.max_starting")
        wait = cfg.duration("timings.dialog_wait")
        if agent.cancel_requested and not server.pipeline_active(agent.uuid):
            pipeline.finish_cancel(server, agent)
        elif agent.error is not None:  # a failed start whose pane close waits on the
            if not server.pipeline_active(agent.uuid):  # multiplexer (pipeline._fail)
                pipeline.fail(server, agent, agent.error)
        elif agent.blocked_reason:  # a person is being asked: the longer limit, no guard
            if (agent.blocked_at or now) + wait < now:
                _guard_expired(server, agent, wait, agent.blocked_reason)
            elif not server.pipeline_active(agent.uuid):
                checked = server.dialog_checked.get(agent.uuid, 0.0)
                if clock.monotonic() - checked >= DIALOG_RECHECK:  # answered yet?
                    server.dialog_checked[agent.uuid] = clock.monotonic()
                    server.start_pipeline(agent.uuid, pipeline.run)
        elif (agent.last_progress_at or agent.started_at or now) + guard < now:
            _guard_expired(server, agent, guard)
        elif not server.pipeline_active(agent.uuid) and now - (agent.last_progress_at or 0) > 1.0:
            server.start_pipeline(agent.uuid, pipeline.run)  # resume after a retryable failure
        return
    if agent.status not in ("working", "idle"):
        return
    if agent.move_state:  # a move whose outcome was never written (a full disk)
        agent = parking.settle(server, agent)
    if agent.cancel_requested:
        pipeline.end(server, agent, "killed")
        return
    delivery.resume_cut_off(server, agent)
    if agent.status == "working" and agent.timeout and agent.turn_started_at:
        if agent.turn_started_at + agent.timeout < now:
            pipeline.end(
                server,
                agent,
                "timeout",
                error=f"turn ran past its timeout of {agent.timeout:g}s",
                decided_on=("status", "turn_started_at"),
            )
            return
    if agent.status == "idle" and agent.idle_since:
        if agent.idle_since + gc_after(cfg, agent) < now:
            pipeline.end(server, agent, "gc", decided_on=("status", "idle_since"))
            return
        park_at = parking.due_at(server, agent)
        if park_at is not None and park_at <= now:
            parking.request(server, agent)  # on the pipeline pool: a move is a driver call
    turns.follow(server, agent)


def _guard_expired(
    server: ServerContext, agent: Agent, guard: float, dialog: str | None = None
) -> None:
    msg = f"stuck-start guard: no progress for {guard:g}s (timings.max_starting)"
    if dialog:
        msg = f"a dialog went unanswered for {guard:g}s (timings.dialog_wait): {dialog}"
    with db.atomic("IMMEDIATE"):
        agent = Agent.get_by_id(agent.id)
        if agent.status != "starting":
            return
        if agent.cancel_requested:
            # a kill was requested while the multiplexer call hung: the kill decides
            lifecycle.transition(agent, "ended", "canceled", reason=msg)
        else:
            lifecycle.transition(agent, "ended", "failed", error=msg)
    server.notify()
    try:
        pipeline.close_pane(server, agent, pane_of(agent), "stuck-start guard")
    except DriverError:
        pass  # reconciliation closes the late pane by label
