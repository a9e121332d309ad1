"""Drift repair between the store and the multiplexer (seed 002).

``recover`` runs once at server start, before the socket opens: rows are
confirmed against one snapshot and re-matched by label (the agent's full path),
never by location. ``run`` repeats the read-only part on a timer and closes the
late panes of starts orcr already ended. Panes orcr cannot explain are counted
in ``server status`` and never touched.
"""

from __future__ import annotations

import logging

from orcr_core import events
from orcr_core.agents import lifecycle, pipeline
from orcr_core.contracts import DriverError, PaneRef
from orcr_core.store.models import ACTIVE, Agent, db

log = logging.getLogger("orcr.reconcile")

#: exit reasons after which orcr itself decided the pane must not exist
ORCR_ENDED = ("failed", "canceled", "killed", "timeout", "gc")


def _snapshot(server):
    try:
        return server.driver.snapshot()
    except DriverError as exc:
        log.warning("reconcile skipped: %s", exc)
        return None


def _ref(p) -> PaneRef:
    return PaneRef(p.workspace_id, p.tab_id, p.pane_id)


def recover(server) -> None:
    """Restart recovery: repair, fail or mark lost every row a crash left mid-way."""
    snap = _snapshot(server)
    if snap is None:
        return  # multiplexer down: leave every row as it is; the monitor retries
    by_id = {p.pane_id: p for p in snap}
    by_label: dict[str, list] = {}
    for p in snap:
        if p.label:
            by_label.setdefault(p.label, []).append(p)
    for agent in Agent.select().where(Agent.status.in_(("starting", "working", "idle", "lost"))):
        pane = by_id.get(agent.pane_id) if agent.pane_id else None
        if pane is not None and pane.label not in (None, agent.path):
            pane = None
        if pane is None and agent.pane_id:
            matches = by_label.get(agent.path, [])
            pane = matches[0] if matches else None
        if agent.status == "starting":
            _recover_starting(server, agent, pane, by_label.get(agent.path, []))
        elif agent.cancel_requested:
            pipeline.end(server, agent, "lost" if agent.status == "lost" else "killed")
        elif pane is None:
            with db.atomic("IMMEDIATE"):
                if agent.status in ("working", "idle"):
                    lifecycle.transition(agent, "lost", repair=True, pane_id=agent.pane_id)
                    server.counters["lost"] += 1
        elif pane.pane_id != agent.pane_id:
            with db.atomic("IMMEDIATE"):
                lifecycle.update(
                    agent,
                    None,
                    pane_id=pane.pane_id,
                    tab_id=pane.tab_id,
                    workspace_id=pane.workspace_id,
                )
                events.emit(
                    "agent.rematched",
                    agent.uuid,
                    path=agent.path,
                    pane_id=pane.pane_id,
                    repair=True,
                )
    _count(server, snap, close_late=True)
    server.notify()


def _recover_starting(server, agent: Agent, pane, same_label: list) -> None:
    if agent.cancel_requested:
        pipeline.finish_cancel(server, agent)
        return
    if pane is not None:
        # repaired: the pipeline resumes at its next step (the prompt is typed
        # only if the transcript does not show it), then starting -> working
        with db.atomic("IMMEDIATE"):
            lifecycle.update(
                agent,
                "agent.repaired",
                pane_id=pane.pane_id,
                tab_id=pane.tab_id,
                workspace_id=pane.workspace_id,
            )
        server.counters["repaired"] += 1
        server.start_pipeline(agent.uuid, pipeline.run)
        return
    for orphan in same_label:  # a pane started but never recorded
        try:
            pipeline.close_pane(server, agent, _ref(orphan), "orphan of a crashed start")
        except DriverError as exc:
            log.warning("could not close orphan pane %s: %s", orphan.pane_id, exc)
    why = (
        "the server stopped mid-start and the pane it recorded is gone"
        if agent.pane_id
        else "the server stopped mid-start before a pane was recorded"
    )
    with db.atomic("IMMEDIATE"):
        lifecycle.transition(agent, "ended", "failed", error=why, repair=True)


def _count(server, snap, close_late: bool) -> None:
    active = {a.path for a in Agent.select(Agent.path).where(Agent.status.in_(ACTIVE))}
    orphans = unmarked = 0
    for p in snap:
        if not p.label:
            unmarked += 1
            continue
        if p.label in active:
            continue
        last = Agent.select().where(Agent.path == p.label).order_by(Agent.id.desc()).first()
        if close_late and last is not None and last.exit_reason in ORCR_ENDED:
            try:
                pipeline.close_pane(server, last, _ref(p), "late pane of an ended agent")
            except DriverError:
                pass
            continue
        orphans += 1
    server.counters["orphan_agent_panes"] = orphans
    server.counters["unmarked_panes"] = unmarked


def run(server) -> None:
    """Periodic pass: drift counts, and late panes of ended starts closed."""
    snap = _snapshot(server)
    if snap is not None:
        _count(server, snap, close_late=True)
