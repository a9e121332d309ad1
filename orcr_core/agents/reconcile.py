"""Drift repair between the store and the multiplexer (seed 002).

``recover`` runs once at server start, before the socket opens: rows are
confirmed against one snapshot and re-matched by the marks every pane carries
(this instance's id and the row's launch token), never by location. ``run`` repeats the read-only part on a timer and closes the
late panes of starts orcr already ended, and settles the open closes of panes
that are gone (:mod:`orcr_core.agents.closes`). Panes orcr cannot explain are counted
in ``server status`` and never touched.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from orcr_core import dirs
from orcr_core.agents import (
    closes,
    lifecycle,
    native,
    panes,
    parking,
    pipeline,
    rematch,
    resume,
    unmanaged,
)
from orcr_core.agents.launch import owned, ref_of
from orcr_core.ceilings import step as ceilings_step
from orcr_core.common import clock
from orcr_core.contracts import DriverError
from orcr_core.store import drift, events
from orcr_core.store.models import ACTIVE, EXIT_REASONS, Agent, db

if TYPE_CHECKING:
    from orcr_core.server.context import ServerContext

log = logging.getLogger("orcr.reconcile")


def _snapshot(server: ServerContext):
    try:
        return server.driver.snapshot()
    except DriverError as exc:
        log.warning("reconcile skipped: %s", exc)
        return None


def recover(server: ServerContext) -> list[str]:
    """Restart recovery: repair, fail or mark lost every row a crash left mid-way.

    A row's pane is the one carrying this instance's id and the row's launch
    token (found whatever its id or label now is); no other pane is touched.

    Returns the uuids of the repaired starts whose pipelines must resume: the
    caller starts them once every recovery step has finished, so no pipeline
    commits while recovery still writes. The rows are read into a list before
    the first write: a live cursor keeps a read snapshot open, and in WAL mode a
    ``BEGIN IMMEDIATE`` on a connection whose snapshot predates another
    connection's commit fails at once ("database is locked"; the busy timeout
    does not apply).
    """
    snap = _snapshot(server)
    if snap is None:
        return []  # multiplexer down: leave every row as it is; the monitor retries
    mine = owned(snap)
    resume_pipelines: list[str] = []
    rows = list(Agent.select().where(Agent.status.in_(("starting", "working", "idle", "lost"))))
    for agent in rows:
        pane = mine.get(agent.launch_token)
        if agent.status != "starting":
            # a half-done park or un-park: where the pane is settles it
            parking.recover(server, agent, None if pane is None or pane.dead else pane)
        if agent.status == "starting":
            if _recover_starting(server, agent, pane):
                resume_pipelines.append(agent.uuid)
        elif agent.cancel_requested:
            pipeline.end(server, agent, "lost" if agent.status == "lost" else "killed")
        elif pane is None and panes.closing_why(agent) in EXIT_REASONS:
            pass  # an end's close (idle GC, a timeout) was under way: the monitor ends
            # the row as that end meant (panes._vanished), never lost in between
        elif pane is None:
            with db.atomic("IMMEDIATE"):
                if agent.status in ("working", "idle") and lifecycle.transition(
                    agent, "lost", repair=True, pane_id=agent.pane_id
                ):
                    drift.bump("lost")
        elif rematch.replaced(agent, pane):  # another process: restored natively, or a shell
            found = native.restored(server, agent, pane)
            if found == "agent":
                native.adopt(server, agent, pane, repair=True)
            elif found == "other":
                rematch.lose(server, agent, pane, repair=True)
            else:  # a native restore may be under way: lost meanwhile, the monitor decides
                native.awaiting(agent, pane, repair=True)
        elif pane.pane_id != agent.pane_id:
            with db.atomic("IMMEDIATE"):
                lifecycle.place(agent, None, pane)
                events.emit(
                    "agent.rematched",
                    agent.uuid,
                    path=agent.path,
                    pane_id=pane.pane_id,
                    repair=True,
                )
    _count(server, snap, close_late=True)
    closes.settle(snap, at_start=True)
    _sweep()
    server.notify()
    return resume_pipelines


def restart_guards() -> int:
    """Server start: the stuck-start guard of every ``starting`` agent counts from now.

    The guard (``timings.max_starting``) bounds how long a running server waits
    on the multiplexer for a start; the time the server was down is no such
    wait. Counted from the last progress marker before a crash, a start picked
    up after a long downtime (a reboot, a night) would fail at once, before the
    resumed pipeline could make its first call. Each row gets an
    ``agent.guard_restarted`` event with the progress time it had. A blocked
    start (a dialog waits on a person, ``timings.dialog_wait``) keeps its clock:
    the dialog was on the screen all along. Returns how many rows it restarted.
    """
    now = clock.time()
    rows = list(Agent.select().where((Agent.status == "starting") & Agent.blocked_reason.is_null()))
    if not rows:
        return 0
    with db.atomic("IMMEDIATE"):
        for agent in rows:
            before = agent.last_progress_at or agent.started_at
            lifecycle.update(agent, None, last_progress_at=now)
            events.emit(
                "agent.guard_restarted",
                agent.uuid,
                path=agent.path,
                last_progress_at=now,
                progress_before=before,
            )
    return len(rows)


def _recover_starting(server: ServerContext, agent: Agent, pane) -> bool:
    """Settle one ``starting`` row; True when its pipeline must resume."""
    if agent.cancel_requested:
        pipeline.finish_cancel(server, agent)
        return False
    if agent.error is not None:  # a failed start whose pane close was pending
        pipeline.fail(server, agent, agent.error)
        return False
    if pane is not None and agent.pane_id:
        # repaired: the pipeline resumes at its next step (the prompt is typed
        # only if the transcript does not show it), then starting -> working
        with db.atomic("IMMEDIATE"):
            lifecycle.place(agent, "agent.repaired", pane)
            drift.bump("repaired")
        return True
    if agent.resumes and not agent.pane_id:
        # a resumed start (``agent resume``, resume_lost): the agent existed before,
        # so failing it would lose it. The pipeline goes on where it stopped; a
        # pane carrying the row's launch token (new for this start) is adopted,
        # never started twice. The stuck-start guard counts from now.
        with db.atomic("IMMEDIATE"):
            lifecycle.update(agent, "agent.repaired", last_progress_at=clock.time())
            drift.bump("repaired")
        return True
    if pane is not None:  # a pane this start made but never recorded: its marks say so
        try:
            pipeline.close_pane(server, agent, ref_of(pane), "orphan of a crashed start")
        except DriverError as exc:
            log.warning("could not close orphan pane %s: %s", pane.pane_id, exc)
    why = (
        "the server stopped mid-start and the pane it recorded is gone"
        if agent.pane_id
        else "the server stopped mid-start before a pane was recorded"
    )
    with db.atomic("IMMEDIATE"):
        if agent.resumes:  # a resumed agent whose new pane is gone: lost again, not failed
            if lifecycle.transition(agent, "ended", "lost", error=why, repair=True):
                drift.bump("lost")
                resume.auto_resume(server, agent)
        else:
            lifecycle.transition(agent, "ended", "failed", error=why, repair=True)
    return False


def _count(server: ServerContext, snap, close_late: bool) -> None:
    """Drift counts; with ``close_late``, close this instance's panes of rows
    that ended (a start that finished after its row was failed or canceled, or
    a multiplexer's restore of a save made while an agent now ended ran).

    A pane carrying a token a resume replaced (``past_tokens``) is late too: that
    launch is over (soak seed 2832 on herdr: a parked agent, herdr restored a save
    from before the move, the agent was resumed, and its old pane stayed to the end).
    Panes carrying another instance's id are that instance's business: neither
    counted nor touched. A labelled pane with no marks, or with this instance's
    id but no row's token, is an orphan: counted, never touched.
    """
    me = dirs.instance_id()
    live = {
        a.launch_token
        for a in Agent.select(Agent.launch_token).where(Agent.status.in_(ACTIVE))
        if a.launch_token
    }
    orphans = unmarked = 0
    for p in snap:
        if p.instance is not None and p.instance != me:
            continue
        if not p.label:
            unmarked += 1
            continue
        if p.instance == me and p.launch_token in live:
            continue
        if close_late and p.instance == me and p.launch_token:
            row = Agent.get_or_none(Agent.launch_token == p.launch_token)
            why, whole = "late pane of an ended agent", True
            if row is None:  # a launch a resume replaced (herdr restored an old save)
                row = Agent.get_or_none(Agent.past_tokens.contains(p.launch_token))
                why = "late pane of an earlier launch (the agent was resumed since)"
                whole = False  # the processes recorded for the row are its running launch's
            elif row.status != "ended":
                # every end counts: orcr closes a pane as it ends its row, so a pane with an
                # ended row's marks is the multiplexer's restore of a save made while the
                # agent ran (``exited``, and ``lost``: herdr SIGKILLed, restarted from a save
                # older than the loss; the soak, seed 3302 on herdr, left one to its end)
                row = None
            if row is not None:
                try:
                    pipeline.close_pane(server, row, ref_of(p), why, whole)
                except DriverError:
                    pass
                continue
        orphans += 1
    drift.measure({"orphan_agent_panes": orphans, "unmarked_panes": unmarked})


class LiveRows:
    """Whether an agent is live, read from the store when the sweep asks about the
    group it found. A set read before the backend listed its groups missed an agent
    admitted meanwhile: the sweep killed its new group with the agent in it, which
    ended at once as ``exited`` (test_ceilings_crash, systemd, in a loaded run)."""

    def __contains__(self, uuid: object) -> bool:
        return Agent.select().where((Agent.uuid == uuid) & Agent.status.in_(ACTIVE)).exists()


def _sweep() -> None:
    """The groups of agents that are not live (ended, or rows a crash left) go."""
    ceilings_step.sweep(LiveRows())


def run(server: ServerContext) -> None:
    """Periodic pass: drift counts, late panes of ended starts closed, and the
    agents in the user's other multiplexer sessions (unmanaged discovery)."""
    snap = _snapshot(server)
    if snap is not None:
        _count(server, snap, close_late=True)
        closes.settle(snap, at_start=False)
    _sweep()
    told = ceilings_step.report_refusals()  # forks a pids ceiling refused (agent.pids_refused)
    if unmanaged.discover(server) or told:
        server.notify(queue=False)
