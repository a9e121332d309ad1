"""The spawn pipeline: durable state before every side effect.

Each step records what it will do (a ``*_requested`` event) before the
multiplexer call and what happened (``*_applied`` plus the ids) right after,
and checks ``cancel_requested`` before and after every call. Steps are
idempotent against what the row already records, so recovery after a crash
resumes a pipeline instead of repeating it: a recorded pane is never started
twice, and a prompt the transcript already shows is never typed twice.
"""

from __future__ import annotations

import dataclasses
import logging
import sqlite3
import time
from typing import TYPE_CHECKING

from peewee import PeeweeException

from orcr_core import dirs
from orcr_core.agents import delivery, dialogs, lifecycle, parking, procs, resume
from orcr_core.agents.dialogs import Canceled
from orcr_core.agents.dialogs import check as _check
from orcr_core.agents.dialogs import fresh as _fresh
from orcr_core.agents.exclusive import agent_lock
from orcr_core.agents.launch import (
    launch_command,
    launch_info,
    launch_spec,
    owned,
    pane_of,
    ref_of,
)
from orcr_core.ceilings import step as ceilings_step
from orcr_core.contracts import DriverError, PaneRef, ProviderError, StartSpec
from orcr_core.store import events, faults, health
from orcr_core.store.models import Agent, db
from orcr_core.workspaces import step as workspace_step
from orcr_core.workspaces.vcs import VcsError

if TYPE_CHECKING:
    from orcr_core.server.context import ServerContext

log = logging.getLogger("orcr.pipeline")

#: driver error codes whose message is the whole story ("claude: command not found")
PLAIN_ERRORS = ("command_not_found", "pane_dead", "provider_fault", "limits_unavailable")


def _progress(agent: Agent, kind: str, **fields) -> None:
    """Record a progress marker (resets the stuck-start guard) and its event."""
    fields["last_progress_at"] = time.time()
    lifecycle.update(agent, kind, **fields)


def run(server: ServerContext, uuid: str) -> None:
    """Take one promoted (``starting``) agent to ``working``."""
    agent = Agent.get(Agent.uuid == uuid)
    if agent.status != "starting":
        return
    try:
        _run(server, agent)
        monitor = getattr(server, "monitor", None)
        if monitor is not None:  # its program runs: a snapshot reports its resume command
            monitor.pane_changed()  # (agents/native.py, herdr 0.9)
    except Canceled:
        finish_cancel(server, agent)
    except (DriverError, ProviderError, OSError, VcsError) as exc:
        if isinstance(exc, DriverError) and exc.retryable:
            log.warning("agent %s: multiplexer unavailable (%s); will retry", agent.path, exc)
            return  # the monitor resumes the pipeline; the stuck-start guard bounds it
        code = getattr(exc, "code", None)
        if isinstance(exc, VcsError):
            error = f"its checkout could not be made: {exc}"
        elif code in ("pane_not_found", "not_found"):
            error = f"its pane is gone mid-start: the program exited or the pane was closed ({exc})"
        else:
            error = str(exc) if code in PLAIN_ERRORS else f"{type(exc).__name__}: {exc}"
        fail(server, agent, error)
    except Exception as exc:  # a bug in a driver or an adapter (UnicodeEncodeError, ...)
        if isinstance(exc, PeeweeException | sqlite3.Error | health.StoreCorrupted):
            raise  # the store's trouble is the server's (store_error), not this agent's
        # retried it would fail the same way several times a second until the
        # stuck-start guard, which would then give a misleading reason
        log.exception("agent %s: start failed", agent.path)
        fail(server, agent, f"{type(exc).__name__}: {exc}")
    finally:
        server.notify()


def _run(server: ServerContext, agent: Agent) -> None:
    driver = server.driver
    if driver is None:
        raise DriverError("no multiplexer driver available", retryable=True)
    provider = server.registry.providers[agent.provider]
    agent = workspace_step.ensure(agent, _check)  # its own checkout first, if it asked
    launch = launch_info(server, agent)
    spec = launch_spec(server, agent, launch)

    if not agent.workspace_id:
        agent = _check(agent)
        faults.point("before_workspace")
        ws = driver.ensure_workspace(agent.path.split("/", 1)[0])
        with db.atomic("IMMEDIATE"):
            agent = _check(agent)
            _progress(agent, "pane.workspace_applied", workspace_id=ws)

    resuming = bool(agent.resumes)
    if not agent.pane_id:
        agent = _check(agent)
        workspace_step.pre_trust(agent, provider, spec)  # a new checkout: no trust dialog
        argv, env = launch_command(
            provider, spec, agent, resume=resuming, sandbox=launch.get("sandbox")
        )
        lifecycle.serve_sandbox(server, agent.uuid, launch.get("sandbox"))
        # its group first; the launch step joins it, then execs argv (ceilings/join.py)
        wrapped = ceilings_step.wrap(server, agent, launch, argv, env)
        # chosen up front, and asked before the pane starts and outside the write
        # transaction: an adapter that hangs or breaks here leaves no pane and no lock
        pointer = None if resuming else provider.launch_session(spec)
        ref = _started_before(driver, agent)
        if ref is None:
            with db.atomic("IMMEDIATE"):
                events.emit("pane.start_requested", agent.uuid, path=agent.path, argv=argv)
            faults.point("before_start")
            ref = driver.start(
                StartSpec(
                    agent.workspace_id,
                    agent.path,
                    agent.cwd,
                    tuple(wrapped),
                    env,
                    instance=dirs.instance_id(),
                    launch_token=agent.launch_token or "",
                )
            )
            faults.point("after_start")
            ref = dataclasses.replace(
                ref, instance=dirs.instance_id(), launch_token=agent.launch_token
            )
        with db.atomic("IMMEDIATE"):
            current = _fresh(agent)
            if current.status != "starting":
                late = True  # the guard or a cancel ended it while start() ran
            else:
                late = False
                agent = current
                lifecycle.release_reused(agent, ref.pane_id)  # its old holders: lost
                _progress(agent, "pane.start_applied", tab_id=ref.tab_id, pane_id=ref.pane_id)
                if pointer is not None:  # a resumed agent keeps the session it continues
                    lifecycle.update(
                        agent,
                        "agent.session",
                        agent_session_source=pointer.source,
                        agent_session_kind=pointer.kind,
                        agent_session_value=pointer.value,
                    )
        if late:
            close_pane(server, current, ref, "late pane of an ended start")
            return
        faults.point("after_pane_recorded")
        agent = _check(agent)

    prompt = launch.get("prompt")
    pane = pane_of(agent)
    if resuming:  # it continues its session: nothing is typed; turns come from the transcript
        # idle only once its input is ready: a prompt sent at once must not be typed
        # into a TUI still loading the session (Claude Code 1.0.98 drops it)
        if not dialogs.await_input(server, agent, provider, spec, pane):
            return  # a dialog asks a person first: the monitor runs this again
        agent = _check(agent)
        outcome = resume.lost_turn(server, _fresh(agent), provider)
        with db.atomic("IMMEDIATE"):
            agent = _check(agent)
            resume.idle_after_loss(agent, outcome, "resumed")
    elif prompt:
        if agent.turn == 0:

            def ready() -> bool:
                if not dialogs.await_input(server, agent, provider, spec, pane):
                    return False  # a dialog asks a person first
                _check(agent)
                return True

            # exactly once across a crash: the paste and the Enter are separate steps,
            # and a resumed delivery decides from them and what the pane shows
            confirmed = delivery.first_prompt(server, agent, prompt, ready)
            if confirmed is None:
                return  # a dialog asks a person first: the monitor runs this again
            faults.point("after_prompt")
        else:
            confirmed = True
        with db.atomic("IMMEDIATE"):
            agent = _check(agent)
            lifecycle.update(agent, None, turn=1)
            events.emit("prompt.applied", agent.uuid, path=agent.path, turn=1, confirmed=confirmed)
            lifecycle.transition(agent, "working")
    else:
        with db.atomic("IMMEDIATE"):
            agent = _check(agent)
            lifecycle.transition(agent, "idle", reason="no prompt")


def _started_before(driver, agent: Agent) -> PaneRef | None:
    """A pane an earlier attempt of this server started (the call failed after
    the multiplexer acted on it), found by this row's marks (never by label
    alone: another instance may run the same path): adopted, never started twice."""
    if not events.has(agent.uuid, "pane.start_requested"):
        return None
    pane = owned(driver.snapshot()).get(agent.launch_token)
    return ref_of(pane) if pane is not None else None


def close_pane(
    server: ServerContext, agent: Agent, pane: PaneRef | None, why: str, whole: bool = True
) -> None:
    """Intent/applied pair around a pane close; then every process the agent
    started that outlived the close gets TERM, then KILL (``procs``).

    ``whole=False``: only the pane's own process tree, for a pane of the agent
    that is not its running launch's (``procs.collect``)."""
    if pane is None or server.driver is None:
        return
    with db.atomic("IMMEDIATE"):
        events.emit(
            "pane.close_requested", agent.uuid, path=agent.path, pane_id=pane.pane_id, why=why
        )
    started = procs.collect(server, agent, pane, whole)  # before the close re-parents them
    server.driver.close(pane)
    faults.point("before_close_applied")  # the pane is closed; its record is not yet
    with db.atomic("IMMEDIATE"):
        events.emit("pane.close_applied", agent.uuid, path=agent.path, pane_id=pane.pane_id)
    procs.stop(server, agent, started)


def finish_cancel(server: ServerContext, agent: Agent) -> None:
    """A canceled start: close its pane if one exists, end the row ``canceled``."""
    with agent_lock(agent.uuid):
        _finish_cancel(server, agent)


def _finish_cancel(server: ServerContext, agent: Agent) -> None:
    agent = _fresh(agent)
    if agent.status != "starting":
        return
    try:
        close_pane(server, agent, pane_of(agent), "canceled while starting")
    except DriverError as exc:
        if exc.retryable:
            return  # keep the intent; the monitor finishes it when the multiplexer answers
    with db.atomic("IMMEDIATE"):
        agent = _fresh(agent)
        if agent.status == "starting":
            lifecycle.transition(agent, "ended", "canceled")


def fail(server: ServerContext, agent: Agent, error: str) -> None:
    with agent_lock(agent.uuid):
        _fail(server, agent, error)


def _fail(server: ServerContext, agent: Agent, error: str) -> None:
    """Close a failed start's pane, then end its row ``failed``.

    A multiplexer that cannot be reached keeps the close's intent open and the row
    ``starting`` with its ``error`` set (a pending failure): the monitor, or
    recovery after a restart, runs this again until the close is applied. Ended at
    once, the row would leave the intent open for good when the pane is gone by
    the time the multiplexer answers (a herdr restart): nothing closes it then."""
    agent = _fresh(agent)
    if agent.status != "starting":
        return
    try:
        close_pane(server, agent, pane_of(agent), "start failed")
    except DriverError as exc:
        if exc.retryable:
            with db.atomic("IMMEDIATE"):
                agent = _fresh(agent)
                if agent.status == "starting" and agent.error != error:
                    lifecycle.update(agent, "agent.fail_pending", error=error)
            return
    with db.atomic("IMMEDIATE"):
        agent = _fresh(agent)
        if agent.status == "starting":
            if agent.cancel_requested:  # a requested kill decides the outcome
                lifecycle.transition(agent, "ended", "canceled", reason=error)
            else:
                lifecycle.transition(agent, "ended", "failed", error=error)


def end(
    server: ServerContext,
    agent: Agent,
    reason: str,
    error: str | None = None,
    decided_on: tuple = (),
) -> bool:
    """End a live agent: close its pane (intent/applied), then the row. False if the
    multiplexer could not be reached (the intent stays; the monitor retries).

    ``decided_on`` names the fields of ``agent`` the decision was taken on (idle GC:
    ``status`` and ``idle_since``): if the row has moved past them since it was read
    (``agent send`` made the agent working), nothing is ended."""
    seen = {f: getattr(agent, f) for f in decided_on}
    with agent_lock(agent.uuid):
        agent = _fresh(agent)
        if agent.status == "ended":
            return True  # ended meanwhile (a kill and the monitor): its pane is closed
        if any(getattr(agent, f) != v for f, v in seen.items()):
            return True  # decided on a read the row has moved past: not to be ended now
        return _end(server, agent, reason, error)


def _end(server: ServerContext, agent: Agent, reason: str, error: str | None) -> bool:
    try:
        if agent.move_state:  # a move left half done is settled first (its pane's ids)
            agent = parking.settle(server, agent)
        close_pane(server, agent, pane_of(agent), reason)
    except DriverError as exc:
        if exc.retryable:
            return False
    with db.atomic("IMMEDIATE"):
        agent = _fresh(agent)
        if agent.status == "ended":
            return True
        data = {"error": error} if error else {}
        lifecycle.transition(agent, "ended", reason, **data)
    server.notify()
    return True


def request_kill(server: ServerContext, agent: Agent) -> dict:
    """``agent kill``: queued -> canceled; starting -> cancel_requested; live -> killed."""
    with db.atomic("IMMEDIATE"):
        agent = _fresh(agent)
        if agent.status == "ended":
            return {"result": "already_ended", "exit_reason": agent.exit_reason}
        if agent.status == "queued":
            lifecycle.transition(agent, "ended", "canceled")
            return {"result": "canceled"}
        lifecycle.update(agent, "agent.kill_requested", cancel_requested=True)
    if agent.status == "starting":
        if not server.pipeline_active(agent.uuid):
            finish_cancel(server, agent)
            agent = _fresh(agent)
            if agent.status == "ended":
                return {"result": "canceled"}
        return {"result": "cancel_requested"}
    reason = "lost" if agent.status == "lost" else "killed"
    if end(server, agent, reason):
        return {"result": reason}
    return {"result": "kill_requested"}
