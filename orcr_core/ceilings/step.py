"""Where ceilings meet an agent's life: its start, its end, the periodic sweep.

* :func:`wrap` (spawn pipeline, before the pane starts): the agent's group is
  made with its ceilings (idempotent: a start resumed after a server SIGKILL
  makes it again) and the argv is prefixed with the launch step
  (:mod:`orcr_core.ceilings.join`), so the agent's first instruction already
  runs inside it.
* :func:`verdict` (:func:`orcr_core.agents.lifecycle.transition`, on an end the
  server did not decide: ``exited``, ``lost``, ``failed``): a group whose memory
  ceiling made the kernel kill turns the end into ``oom`` with the ceiling, the
  peak and the process killed.
* :func:`pids_note` (the same transition, on every end): a group whose pids
  ceiling refused forks leaves that in the ended agent's error;
  :func:`report_refusals` (the reconciliation pass) records it on a live one as
  ``agent.pids_refused`` events.
* :func:`release` and :func:`sweep`: groups of agents that ended (or whose rows
  a crash left behind) are removed, their leftover processes killed.
"""

from __future__ import annotations

import logging
from collections.abc import Container
from typing import TYPE_CHECKING

from orcr_core import ceilings
from orcr_core.ceilings import human

if TYPE_CHECKING:
    from orcr_core.server.context import ServerContext

log = logging.getLogger("orcr.ceilings")

#: ends the server did not decide itself: the kernel's kill may be the reason
UNDECIDED = ("exited", "lost", "failed")


class Unavailable(Exception):
    """A run asks for ceilings no mechanism here can hold (``limits_unavailable``)."""

    code = "limits_unavailable"


def refusal(config, provider: str, run: dict | None) -> str | None:
    """Why admission refuses this run's ceilings here, or None."""
    found = ceilings.current()
    if found.backend is not None:
        return None
    asked = ceilings.asks(config, provider, run)
    if not asked:
        return None
    return (
        f"this run asks for ceilings ({', '.join(asked)}) but no mechanism can hold them "
        f"here: {found.reason}; or drop them (limits.mechanism = none only warns)"
    )


def wrap(server: ServerContext, agent, launch: dict, argv: list[str], env: dict) -> list[str]:
    """The argv that starts ``agent`` inside its ceilings (unchanged without a mechanism)."""
    from orcr_core.contracts import DriverError
    from orcr_core.store import events, faults
    from orcr_core.store.models import db

    found = ceilings.current()
    run = launch.get("limits") or {}
    if found.backend is None:
        why = refusal(server.config, agent.provider, run)
        if why:
            raise DriverError(why, code="limits_unavailable")
        return argv
    limits = ceilings.resolve(server.config, agent.provider, run, ceilings.ram_total())
    fleet = ceilings.size(
        server.config.get("limits.fleet_memory_max"), ceilings.ram_total(), "fleet_memory_max"
    )
    found.backend.ensure_fleet(fleet)
    found.backend.create(agent.uuid, limits)
    faults.point("after_group")
    with db.atomic("IMMEDIATE"):
        events.emit(
            "agent.ceilings",
            agent.uuid,
            path=agent.path,
            mechanism=found.mechanism,
            fleet_memory_max=fleet,
            **limits.as_dict(),
        )
    return [*found.backend.launch_prefix(agent.uuid), *argv]


def restore_argv(uuid: str, argv: list[str]) -> list[str]:
    """The resume command a multiplexer runs itself (herdr's native restore), behind
    the launch step when the agent has a group: restored, it is back inside it."""
    backend = ceilings.current().backend
    if backend is None or not backend.usage(uuid):
        return argv
    return [*backend.launch_prefix(uuid), *argv]


def verdict(uuid: str) -> str | None:
    """The error of an agent the kernel killed at its memory ceiling, or None."""
    backend = ceilings.current().backend
    if backend is None:
        return None
    try:
        hit = backend.oom(uuid)
    except OSError:
        return None
    if not hit:
        return None
    killed = (
        f"the kernel killed {hit['task']} (pid {hit['pid']})"
        if hit.get("task")
        else f"the kernel killed {hit['kills']} process(es) in it"
    )
    own, peak = hit["max"], hit["peak"]  # peak None: not reported (systemd before 256)
    if own is None or (peak is not None and peak < own * 0.95):  # the fleet's ceiling was
        fleet = hit.get("fleet_max")
        return (
            f"fleet memory ceiling {human(fleet)} (limits.fleet_memory_max) reached "
            f"(this agent's peak {human(peak or 0)}): {killed}"
        )
    seen = human(peak) if peak is not None else "not reported"
    return f"memory ceiling {human(own)} reached (peak {seen}): {killed}"


def pids_note(uuid: str) -> str | None:
    """``process ceiling 64 reached: forks refused 3 times`` when the agent's pids
    ceiling refused forks (the group's ``pids.events`` ``max`` counter; where none is
    kept, a group found at its ceiling), else None."""
    p = (usage(uuid) or {}).get("pids") or {}
    refused, limit, now = p.get("refused"), p.get("max"), p.get("current")
    if limit is None:
        return None
    if refused:
        times = "once" if refused == 1 else f"{refused} times"
        return f"process ceiling {limit} reached: forks refused {times}"
    if refused is None and now is not None and now >= limit:
        return f"process ceiling {limit} reached"
    return None


#: forks refused per live agent, as last reported in an ``agent.pids_refused`` event
_refused: dict[str, int] = {}


def report_refusals() -> int:
    """An ``agent.pids_refused`` event (``path, pids_max, refused, current``) for each
    live agent whose pids ceiling refused forks since the last look; how many. Run by
    the reconciliation pass; after a server restart each such agent is reported once
    more (the count is read from the kernel, the last report is not kept)."""
    backend = ceilings.current().backend
    if backend is None:
        return 0
    from orcr_core.store import events
    from orcr_core.store.models import LIVE, Agent, db

    seen: dict[str, int] = {}
    for a in Agent.select(Agent.uuid, Agent.path).where(Agent.status.in_(LIVE)):
        try:  # one file per agent: the whole usage() only for one that was refused
            refused = backend.refused(a.uuid) or 0
        except OSError:
            refused = 0
        seen[a.uuid] = max(refused, _refused.get(a.uuid, 0))
        if refused > _refused.get(a.uuid, 0):
            p = (usage(a.uuid) or {}).get("pids") or {}
            refused = max(refused, p.get("refused") or 0)
            with db.atomic("IMMEDIATE"):
                events.emit(
                    "agent.pids_refused",
                    a.uuid,
                    path=a.path,
                    pids_max=p.get("max"),
                    refused=refused,
                    current=p.get("current"),
                )
    told = sum(seen[u] > _refused.get(u, 0) for u in seen)
    _refused.clear()
    _refused.update(seen)
    return told


def usage(uuid: str) -> dict | None:
    """``{memory: {current, peak, high, max}, pids: {current, max, refused}}`` of a live agent."""
    backend = ceilings.current().backend
    if backend is None:
        return None
    try:
        return backend.usage(uuid)
    except OSError:
        return None


def status(config) -> dict:
    """``server status``'s ceilings: the mechanism, the fleet's memory against its
    ceiling, the pressure, and each live agent's memory ``{current, max}`` by uuid
    (``agents``: top's MEM column, refreshed with every status)."""
    from orcr_core.ceilings import pressure
    from orcr_core.store.models import LIVE, Agent

    found = ceilings.current()
    backend = found.backend
    agents = {}
    if backend is not None:
        for a in Agent.select(Agent.uuid).where(Agent.status.in_(LIVE)):
            u = usage(a.uuid)
            if u:
                agents[a.uuid] = {k: u["memory"][k] for k in ("current", "max")}
    return {
        **found.as_dict(),
        "fleet": backend.fleet_usage() if backend is not None else None,
        "pressure": pressure.some_avg10(),
        "max_memory_pressure": config.get("concurrency.max_memory_pressure"),
        "agents": agents,
    }


def release(uuid: str) -> None:
    """Remove an ended agent's group if it is empty; else the next sweep does."""
    backend = ceilings.current().backend
    if backend is not None:
        try:
            backend.remove(uuid)
        except OSError as exc:
            log.warning("agent %s: its group stays for the sweep: %s", uuid, exc)


def sweep(live: Container[str]) -> list[str]:
    """Remove the groups of agents not live (killing what is left in them)."""
    backend = ceilings.current().backend
    if backend is None:
        return []
    try:
        removed = backend.sweep(live)
    except OSError as exc:
        log.warning("ceilings sweep failed: %s", exc)
        return []
    if removed:
        log.info("removed %d group(s) of ended agents: %s", len(removed), removed)
    return removed
