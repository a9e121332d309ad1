"""Re-match means the agent is still there (issue 10 item 1).

A pane found again by its marks after a multiplexer restart is the agent only
if the process orcr started still runs in it. herdr restores panes under their
labels (and tab labels, so the marks) as plain shells with new terminal ids;
tmux can respawn a pane's process in place (``respawn-pane``). So orcr records
who runs in the pane once it first sees it (:func:`identity`: herdr's terminal
id, else the pane's pid and its start time) and compares on every later match.
A different process means the agent is gone: the row becomes ``lost`` (and
``ended (lost)`` a poll later, as for a vanished pane) and the pane, which
carries this instance's id and the row's launch token, is closed.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from orcr_core.agents import lifecycle, pipeline, procs
from orcr_core.agents.launch import ref_of
from orcr_core.contracts import DriverError, PaneInfo
from orcr_core.store import drift
from orcr_core.store.models import Agent, db

if TYPE_CHECKING:
    from orcr_core.server.context import ServerContext

log = logging.getLogger("orcr.rematch")


def identity(pane: PaneInfo) -> str | None:
    """Who runs in ``pane``: ``terminal:<id>`` (herdr), ``pid:<pid>@<start>`` (tmux;
    :func:`orcr_core.agents.procs.stamp`), or None when the multiplexer says nothing
    that tells processes apart."""
    if pane.terminal_id:
        return f"terminal:{pane.terminal_id}"
    if pane.pid:
        started = procs.stamp(pane.pid)
        return None if started is None else f"pid:{pane.pid}@{started}"
    return None


def replaced(agent: Agent, pane: PaneInfo) -> bool:
    """The pane now runs another process than the one orcr started for ``agent``, or
    nothing at all: the multiplexer could not restore it (``restore_error``)."""
    if pane.restore_error:
        return True
    if not agent.pane_process or pane.dead:
        return False
    was = agent.pane_process
    if pane.pid and was.startswith(f"pid:{pane.pid}@"):
        # the same pid: the same process if it started when recorded, compared in the
        # row's own form (a row written before stamps counted from boot)
        now = procs.stamp_like(pane.pid, was.split("@", 1)[1])
        return now is not None and f"pid:{pane.pid}@{now}" != was
    now = identity(pane)
    return now is not None and now != was


def record(agent: Agent, pane: PaneInfo) -> None:
    """Remember who runs in the agent's pane, the first time orcr sees it.

    Call inside the caller's transaction."""
    if agent.pane_process or pane.dead:
        return
    ident = identity(pane)
    if ident is not None:
        lifecycle.update(agent, None, pane_process=ident)


def lose(server: ServerContext, agent: Agent, pane: PaneInfo, repair: bool = False) -> None:
    """The agent is gone from its re-matched pane: ``lost``, and the leftover closed.

    The close names the pane's marks (this instance, the row's token), so the
    driver closes it only if it still carries them. ``repair`` marks the change
    as recovery's (at server start), as every status change recovery makes."""
    why = (
        "the multiplexer reports another process in the agent's pane "
        "(restored as a shell after a restart, or respawned)"
    )
    extra: dict = {"repair": True} if repair else {}
    if pane.restore_error:
        why = "the multiplexer could not restore the agent's pane after a restart"
        extra["error"] = f"{why}: {pane.restore_error}"
    with db.atomic("IMMEDIATE"):
        current = Agent.get_by_id(agent.id)
        if current.status in ("working", "idle"):
            if lifecycle.transition(
                current,
                "lost",
                pane_id=pane.pane_id,
                why=why,
                was=current.pane_process,
                now=identity(pane),
                **extra,
            ):
                drift.bump("lost")
        agent.__data__.update(current.__data__)
    try:
        pipeline.close_pane(server, agent, ref_of(pane), "the agent is gone from its pane")
    except DriverError as exc:
        log.warning("agent %s: could not close its leftover pane: %s", agent.path, exc)
