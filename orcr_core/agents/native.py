"""A multiplexer's own restore of an agent (herdr 0.9.2's ``resume_argv``, issue 21 item 7).

**Report.** Once an agent's program runs (``idle`` or ``working``) with its session
recorded, orcr gives a driver that takes it (``reports_resume()``: herdr 0.9) the
command ``orcr agent resume`` would run: the provider's ``resume_argv`` with the
agent's env, orcr's identity variables included. Once per pane process: the row's
``resume_reported`` names the ``pane_process`` it was given for (``refused:<process>``
when the multiplexer refused it: logged, the agent unaffected, not asked again).
Only providers with a transcript: a report makes orcr the pane's lifecycle
authority in herdr, replacing the status herdr detects, which a ``command``
agent's turns are read from.

**Re-match.** After a multiplexer restart the agent's pane (found by its marks)
runs another process. If one of the pane's foreground processes carries the row's
``ORCR_ID`` and ``ORCR_LAUNCH_TOKEN`` in its environment, the restore started this
very agent in its own session: orcr adopts it (:func:`adopt`: new identity, row
kept, ``agent.rematched`` with ``native_restore``). While only the shell runs there
and the agent's command had been reported for the process that was lost, the
restore may still be under way: orcr waits up to :data:`RESTORE_GRACE` seconds
before it judges the agent lost (then closes the pane and resumes it as before).
A restore that started anything else (herdr's built-in ``claude --resume``, a
plain shell) is not the agent: lost, its pane closed, as before. orcr never
resumes an agent whose pane is still there, so one agent never runs twice.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from orcr_core.agents import lifecycle, procs, resume
from orcr_core.agents.launch import launch_command, launch_info, launch_spec, ref_of
from orcr_core.agents.rematch import identity
from orcr_core.ceilings import step as ceilings_step
from orcr_core.contracts import DriverError, NativeResume, PaneInfo, PaneProcesses
from orcr_core.sandbox import policy as sandbox_policy
from orcr_core.store import drift, events, faults
from orcr_core.store.models import Agent, db

if TYPE_CHECKING:
    from orcr_core.server.context import ServerContext

log = logging.getLogger("orcr.native")

try:
    import psutil
except ImportError:  # pragma: no cover - psutil is a dependency
    psutil = None

#: seconds a restored pane may show only its shell before orcr judges the agent lost
RESTORE_GRACE = 10.0
REFUSED = "refused:"
OWNED = "status:"  # reported as orcr's own agent: herdr's status of the pane is orcr's report
#: (uuid, pane identity) -> when this server first saw a restored pane's process
_first_seen: dict[tuple[str, str | None], float] = {}


def _provider(server: ServerContext, agent: Agent):
    driver = server.driver
    if not isinstance(driver, NativeResume) or not driver.reports_resume():
        return None
    provider = server.registry.providers.get(agent.provider)
    if provider is None or not provider.has_transcript or not resume.supports_resume(provider):
        return None
    return provider


def holds(agent: Agent) -> bool:
    """The multiplexer was given the agent's resume command for its pane process."""
    ident = agent.pane_process
    return bool(ident) and agent.resume_reported in (ident, OWNED + ident)


def owns_status(agent: Agent, pane: PaneInfo) -> bool:
    """herdr's agent status of the pane is orcr's own report (a witness of nothing):
    reported as orcr's agent, and no other agent has taken the pane since."""
    ident = agent.pane_process
    return bool(ident) and agent.resume_reported == OWNED + ident and pane.agent == agent.provider


def report(server: ServerContext, agent: Agent, pane: PaneInfo) -> None:
    """Give the multiplexer the agent's resume command, once per pane process."""
    ident = agent.pane_process
    if agent.status not in ("idle", "working") or not ident or not agent.agent_session_value:
        return
    if agent.resume_reported in (ident, OWNED + ident, REFUSED + ident):
        return
    provider = _provider(server, agent)
    if provider is None:
        return
    owned = False
    try:
        launch = launch_info(server, agent)
        argv, env = launch_command(
            provider,
            launch_spec(server, agent, launch),
            agent,
            resume=True,
            sandbox=launch.get("sandbox"),
        )
        lifecycle.serve_sandbox(server, agent.uuid, launch.get("sandbox"))
        # a sandbox's bubblewrap argv is longer than herdr takes: the launcher reads it
        # from a file orcr keeps, out of the agent's reach
        argv = sandbox_policy.restore_argv(launch.get("sandbox"), argv)
        # herdr runs it itself after a restart: through the launch step, so the
        # restored agent is back in its group (which lives while the agent does)
        argv = ceilings_step.restore_argv(agent.uuid, argv)
        state = "working" if agent.status == "working" else "idle"
        owned = server.driver.report_resume(
            ref_of(pane), agent.provider, state, argv, env, detected=pane.agent
        )
        refused = None
    except DriverError as exc:
        if exc.retryable or exc.code in ("pane_not_found", "pane_dead"):
            return  # asked again at the next snapshot
        refused = exc
    except Exception as exc:  # an adapter or a launch.json that breaks: never the agent's end
        log.warning("agent %s: no resume command for the multiplexer: %s", agent.path, exc)
        refused = DriverError(str(exc), code="resume_argv_unavailable")
    faults.point("resume_reported")
    with db.atomic("IMMEDIATE"):
        current = Agent.get_by_id(agent.id)
        if current.pane_process != ident or current.status not in ("idle", "working"):
            return
        mark = REFUSED + ident if refused is not None else (OWNED if owned else "") + ident
        lifecycle.update(current, None, resume_reported=mark)
        if refused is None:
            events.emit("agent.resume_reported", agent.uuid, path=agent.path, pane_id=pane.pane_id)
        else:
            log.warning(
                "agent %s: the multiplexer refused its resume command (%s): %s; orcr "
                "resumes it itself if it is lost",
                agent.path,
                refused.code,
                refused,
            )
            events.emit(
                "agent.resume_refused",
                agent.uuid,
                path=agent.path,
                pane_id=pane.pane_id,
                code=refused.code,
                error=str(refused),
            )
        agent.__data__.update(current.__data__)


def _runs_agent(pid: int, agent: Agent) -> bool:
    if psutil is None:
        return False
    try:
        env = psutil.Process(pid).environ()
    except (psutil.Error, OSError):
        return False
    return env.get("ORCR_ID") == agent.uuid and env.get("ORCR_LAUNCH_TOKEN") == agent.launch_token


def exited(server: ServerContext, agent: Agent, pane: PaneInfo) -> bool:
    """The agent's program ended in a pane that outlives it: a pane a native restore
    brought back runs a shell, and the agent is a job in it, so its end leaves the
    pane open at the shell's prompt (a prompt typed there would run as a command).
    herdr says so by clearing the agent label orcr reported for the pane: 0.9.2 drops a
    self-reported agent once the pane's shell is back in front (HERDR-0.9.md §7.2),
    and its detection clears its own agent when that exits. Only then orcr looks: no
    process in the pane's foreground or at its root carries the row's ``ORCR_ID`` and
    launch token (in a pane orcr started, the root is the agent's own program)."""
    if not holds(agent) or pane.agent is not None or pane.dead or pane.restore_error:
        return False
    drv = server.driver
    if not isinstance(drv, NativeResume) or not isinstance(drv, PaneProcesses):
        return False
    probe, root = drv.foreground_pids, drv.pane_pid
    try:
        pids = probe(ref_of(pane))
        if pids is None:
            return False
        pid = root(ref_of(pane))
    except DriverError:
        return False
    return not any(_runs_agent(p, agent) for p in [*pids, *([pid] if pid else [])])


def restored(server: ServerContext, agent: Agent, pane: PaneInfo) -> str:
    """What runs in a pane whose process changed: ``"agent"`` (the restore started
    this agent in its own session), ``"wait"`` (only the shell yet, and the agent's
    command had been reported: the restore may be under way), else ``"other"``.
    The grace counts from when this server first saw that process."""
    if pane.restore_error or pane.dead:
        return "other"
    if not isinstance(server.driver, NativeResume):
        return "other"
    probe = server.driver.foreground_pids
    try:
        pids = probe(ref_of(pane))
    except DriverError:
        pids = None
    if pids and any(_runs_agent(pid, agent) for pid in pids):
        return "agent"
    if holds(agent):
        first = _first_seen.setdefault((agent.uuid, identity(pane)), time.monotonic())
        if time.monotonic() - first < RESTORE_GRACE:
            return "wait"
    return "other"


def awaiting(agent: Agent, pane: PaneInfo, repair: bool = False) -> None:
    """A restore may be under way in the agent's pane: ``lost`` meanwhile, so no
    prompt is typed into the shell that waits for the agent's command."""
    with db.atomic("IMMEDIATE"):
        current = Agent.get_by_id(agent.id)
        if current.status in ("working", "idle") and current.launch_token == agent.launch_token:
            why = "the multiplexer restarted and may be restoring the agent in its pane"
            extra: dict = {"repair": True} if repair else {}
            if lifecycle.transition(current, "lost", pane_id=pane.pane_id, why=why, **extra):
                drift.bump("lost")
        agent.__data__.update(current.__data__)


def adopt(server: ServerContext, agent: Agent, pane: PaneInfo, repair: bool = False) -> bool:
    """The restored pane runs the agent: record its new process and ids, keep the row.

    A turn under way when the old process died is over: the row goes ``idle`` and
    says how the turn ended, as after ``agent resume`` (:func:`resume.lost_turn`)."""
    provider = server.registry.providers.get(agent.provider)
    outcome = resume.lost_turn(server, agent, provider) if provider is not None else {}
    faults.point("native_restore_seen")
    now = identity(pane)
    with db.atomic("IMMEDIATE"):
        current = Agent.get_by_id(agent.id)
        if current.launch_token != agent.launch_token or current.status not in (
            "working",
            "idle",
            "lost",
        ):
            return False
        was = current.pane_process
        lifecycle.place(current, None, pane, pane_process=now)
        events.emit(
            "agent.rematched",
            agent.uuid,
            path=agent.path,
            pane_id=pane.pane_id,
            tab_id=pane.tab_id,
            workspace_id=pane.workspace_id,
            native_restore=True,
            was=was,
            now=now,
            **({"repair": True} if repair else {}),
        )
        drift.bump("repaired")
        if current.status != "idle":
            resume.idle_after_loss(current, outcome, "restored", repair=True)
        agent.__data__.update(current.__data__)
    procs.forget(agent.uuid)  # its process tree has a new root
    log.info("agent %s: the multiplexer restored it in its own session (%s)", agent.path, now)
    return True
