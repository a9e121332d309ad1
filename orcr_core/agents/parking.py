"""Park and un-park (agent lifecycle): idle agents leave their workspace.

An agent ``idle`` for ``timings.park_after`` is moved out of its level-1
workspace into this instance's parking area (the driver's ``move(pane,
PARKING)``), so a workspace shows the agents that are doing something. It is
brought back (``move(pane, <its workspace>)``) when it gets a prompt (``agent
send``) or ``agent attach``. A parked agent is still ``idle``, still holds its
slot, and GC still ends it; parking changes where its pane is, nothing else.

Each move is an intent/applied pair around the one multiplexer call: the row's
``move_state`` (``parking``/``unparking``) and a ``pane.move_requested`` event
are committed before the call, ``parked_at``, the new pane ids, a cleared
``move_state`` and ``pane.moved`` after it. A server killed in between leaves
``move_state`` set; :func:`recover` (server start) then looks where the pane
is (by its marks) and completes the move if the multiplexer made it, or rolls
it back if not: the agent is in exactly one place and the row says which.

The park clock starts when the agent went idle or was last un-parked (an
attach brings it back for a while), ``max(idle_since, unparked_at) +
timings.park_after``, all persisted, so a restart neither restarts nor skips it. A driver without ``move`` never parks.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from orcr_core.agents import lifecycle
from orcr_core.agents.launch import owned, pane_of
from orcr_core.common import clock
from orcr_core.contracts import PARKING, DriverError, PaneRef, Parking
from orcr_core.store import events, faults
from orcr_core.store.models import Agent, db

if TYPE_CHECKING:
    from orcr_core.server.context import ServerContext

log = logging.getLogger("orcr.parking")

_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()
#: agents whose park is under way, or failed: not due again before this time
_not_before: dict[str, float] = {}


def _lock(uuid: str) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault(uuid, threading.Lock())


_supported: tuple[object, bool] = (None, False)  # (driver, whether it parks)


def supported(server: ServerContext) -> bool:
    """The driver can park (an ``isinstance`` on a runtime Protocol costs ~60 us: the
    monitor asks for each idle row; the answer is kept per driver object)."""
    global _supported
    driver = server.driver
    if _supported[0] is not driver:
        _supported = (driver, isinstance(driver, Parking))
    return _supported[1]


def due_at(server: ServerContext, agent: Agent, backoff: bool = True) -> float | None:
    """When ``agent`` is to be parked, or None (not idle, parked, moving, parking off).

    ``backoff``: not before a failed (or running) attempt's retry time."""
    if (
        agent.status != "idle"
        or not agent.idle_since
        or agent.parked_at
        or agent.move_state
        or agent.cancel_requested
        or not agent.pane_id
        or not supported(server)
    ):
        return None
    after = server.config.duration("timings.park_after")
    if not after:
        return None
    at = max(agent.idle_since, agent.unparked_at or 0.0) + after
    return max(at, _not_before.get(agent.uuid, 0.0)) if backoff else at


def request(server: ServerContext, agent: Agent) -> None:
    """Park ``agent`` on the pipeline pool (one job per agent: a prompt queued
    behind it un-parks it again)."""
    _not_before[agent.uuid] = clock.time() + _retry_after(server)  # no re-fire meanwhile
    server.start_pipeline(agent.uuid, _park_job)


def _retry_after(server: ServerContext) -> float:
    return max(server.config.duration("timings.reconcile_every"), 1.0)


def _level1(agent: Agent) -> str:
    return agent.path.split("/", 1)[0]


def _park_job(server: ServerContext, uuid: str) -> None:
    agent = Agent.get_or_none(Agent.uuid == uuid)
    if agent is None:
        return
    try:
        park(server, agent)
    except DriverError as exc:
        log.warning("agent %s: not parked: %s", agent.path, exc)
        return  # _not_before holds the next try back
    _not_before.pop(uuid, None)


def park(server: ServerContext, agent: Agent) -> bool:
    """Move an idle agent's pane to the parking area. Returns whether it moved."""
    with _lock(agent.uuid):
        agent = Agent.get_by_id(agent.id)
        when = due_at(server, agent, backoff=False)
        # a timer may wake up to 1 ms before its deadline: that is due, not a second
        # wait behind _not_before
        if when is None or when > clock.time() + 0.001:
            return False
        return _move(server, agent, "parking")


def unpark(server: ServerContext, agent: Agent, why: str) -> Agent:
    """Bring a parked agent's pane back to its workspace (a prompt, an attach).

    Returns the fresh row. Raises :class:`DriverError` when the move failed
    (the row then still says parked: the pane did not move).
    """
    with _lock(agent.uuid):
        agent = Agent.get_by_id(agent.id)
        if not agent.parked_at or agent.status not in ("idle", "working") or not supported(server):
            return agent
        _move(server, agent, "unparking", why=why)
        return Agent.get_by_id(agent.id)


def _move(server: ServerContext, agent: Agent, state: str, why: str | None = None) -> bool:
    pane = pane_of(agent)
    if pane is None:
        return False
    to = PARKING if state == "parking" else f"workspace {_level1(agent)}"
    with db.atomic("IMMEDIATE"):
        fresh = Agent.get_by_id(agent.id)
        if fresh.move_state or fresh.status not in ("idle", "working"):
            return False
        extra = {"why": why} if why else {}
        lifecycle.update(fresh, None, move_state=state)
        events.emit(
            "pane.move_requested", agent.uuid, path=agent.path, pane_id=pane.pane_id, to=to, **extra
        )
    faults.point(f"{'park' if state == 'parking' else 'unpark'}_requested")
    try:
        dest = PARKING if state == "parking" else server.driver.ensure_workspace(_level1(agent))
        moved = server.driver.move(pane, dest)
    except DriverError as exc:
        with db.atomic("IMMEDIATE"):
            lifecycle.update(agent, None, move_state=None)
            events.emit(
                "pane.move_failed",
                agent.uuid,
                path=agent.path,
                pane_id=pane.pane_id,
                to=to,
                error=str(exc),
            )
        server.notify()
        raise
    faults.point(f"{'park' if state == 'parking' else 'unpark'}_moved")
    _applied(agent, moved, parked=state == "parking", to=to)
    server.notify()
    return True


def _applied(agent: Agent, moved: PaneRef, parked: bool, to: str, **extra) -> None:
    with db.atomic("IMMEDIATE"):
        # the clock starts once the write lock is ours, and the pane.moved below carries
        # that very instant (not one a moment later), however long another writer made this wait
        now = clock.time()
        current = Agent.get_by_id(agent.id)
        lifecycle.place(
            current,
            None,
            moved,
            move_state=None,
            parked_at=(current.parked_at or now) if parked else None,
            # the clock restarts only when a parked pane came back (not on a rollback)
            unparked_at=now if current.parked_at and not parked else current.unparked_at,
        )
        events.emit(
            "pane.moved",
            agent.uuid,
            path=agent.path,
            pane_id=moved.pane_id,
            to=to,
            parked=parked,
            ts=now,
            **extra,
        )
        agent.__data__.update(current.__data__)


def settle(server: ServerContext, agent: Agent) -> Agent:
    """A move this server left half done: settle it from where the pane is now.

    ``move_state`` outlives a move within a running server when the write after
    the multiplexer call fails (a full disk: ``pane.moved`` or ``pane.move_failed``
    is never written) and the job dies with it; nothing but :func:`recover` at the
    next server start would ever clear it, and an agent ended meanwhile (GC, a
    kill) keeps its ``pane.move_requested`` open for good. The monitor calls this
    for a live row with ``move_state`` set, and ``pipeline`` before ending one. A
    move under way holds the agent's lock and settles itself: skipped then.

    Returns the fresh row (its pane ids as the settled move left them)."""
    lock = _lock(agent.uuid)
    if not lock.acquire(blocking=False):
        return agent
    try:
        fresh = Agent.get_or_none(Agent.id == agent.id)
        if fresh is None or not fresh.move_state:
            return fresh or agent
        pane = owned(server.driver.snapshot()).get(fresh.launch_token)
        recover(server, fresh, None if pane is None or pane.dead else pane)
        _not_before.pop(fresh.uuid, None)
        return Agent.get_by_id(fresh.id)
    finally:
        lock.release()


def recover(server: ServerContext, agent: Agent, pane) -> None:
    """Server start: settle a half-done move (or a row that disagrees with where
    its pane is) from the snapshot's ``pane`` (None: the pane is gone).

    The pane's place is the truth: parked in the parking area completes a park
    (or rolls back an un-park), anywhere else completes an un-park (or rolls
    back a park). A repair event says which.
    """
    if pane is None:
        if agent.move_state:
            with db.atomic("IMMEDIATE"):
                lifecycle.update(agent, None, move_state=None)
                events.emit(
                    "pane.move_failed", agent.uuid, path=agent.path, repair=True, error="pane gone"
                )
        return
    parked = bool(getattr(pane, "parked", False))
    if not agent.move_state and bool(agent.parked_at) == parked:
        return
    wanted = {"parking": True, "unparking": False}.get(agent.move_state or "")
    outcome = "completed" if wanted == parked else "rolled_back" if wanted is not None else "found"
    ref = PaneRef(pane.workspace_id, pane.tab_id, pane.pane_id)
    to = PARKING if parked else f"workspace {_level1(agent)}"
    _applied(agent, ref, parked=parked, to=to, repair=True, outcome=outcome)
