"""The one place where agent status transitions are written.

Every transition is checked against the status model (DESIGN.md §4) and writes
its event row in the caller's transaction. Callers open ``db.atomic("IMMEDIATE")``
at their top; these helpers never open transactions of their own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orcr_core.ceilings import step
from orcr_core.common import clock
from orcr_core.contracts import AgentStatus as S
from orcr_core.contracts import ExitReason
from orcr_core.store import events
from orcr_core.store.models import EXIT_REASONS, Agent, Event, db

if TYPE_CHECKING:
    from orcr_core.server.context import ServerContext

#: from-status -> statuses it may move to
TRANSITIONS: dict[str, tuple[S, ...]] = {
    S.QUEUED: (S.STARTING, S.ENDED),
    S.STARTING: (S.WORKING, S.IDLE, S.ENDED),
    S.WORKING: (S.IDLE, S.LOST, S.ENDED),
    S.IDLE: (S.WORKING, S.LOST, S.ENDED),
    S.LOST: (S.WORKING, S.IDLE, S.ENDED),
    S.ENDED: (),
}


class IllegalTransition(Exception):
    code = "illegal_transition"


def transition(agent: Agent, to: str, exit_reason: str | None = None, **data) -> bool:
    """Move ``agent`` to ``to`` if it is still in the status it was read in.

    The UPDATE is guarded by the old status, so a concurrent writer that got
    there first makes this a no-op (returns False) rather than a lost update.
    """
    frm = agent.status
    if to not in TRANSITIONS[frm]:
        raise IllegalTransition(f"agent {agent.path}: {frm} -> {to} is not a legal transition")
    if to == S.ENDED and exit_reason not in EXIT_REASONS:
        raise IllegalTransition(
            f"ended needs an exit_reason in {EXIT_REASONS}, got {exit_reason!r}"
        )
    if to == S.ENDED and exit_reason in step.UNDECIDED:
        # the kernel killed it at its memory ceiling: that is why it ended
        oom = step.verdict(agent.uuid)
        if oom:
            exit_reason, data["error"] = ExitReason.OOM, oom
    if to == S.ENDED and (pids := step.pids_note(agent.uuid)):
        # its pids ceiling refused forks: the ended agent keeps that in its error
        before = data.get("error") or getattr(agent, "error", None) or ""
        data["error"] = before if pids in before else f"{before}; {pids}" if before else pids
    now = clock.time()
    fields: dict = {"status": to}
    if to == S.ENDED:
        fields.update(exit_reason=exit_reason, ended_at=now)
        if data.get("error"):
            fields["error"] = data["error"]
    elif to == S.LOST and data.get("error"):  # why it is lost, when the multiplexer said
        fields["error"] = data["error"]
    elif to == S.STARTING:
        fields.update(started_at=now, last_progress_at=now)
    elif to == S.WORKING:
        fields.update(turn_started_at=now, idle_since=None)
    elif to == S.IDLE:
        fields.update(idle_since=now)
    stalled = frm == S.WORKING and getattr(agent, "stalled_at", None) is not None
    if stalled:  # the stalled flag belongs to a working agent (agents/stall.py)
        fields["stalled_at"] = None
    # a question asked mid-turn (agents/asking.py) is over with the turn
    asked = frm == S.WORKING and getattr(agent, "blocked_reason", None) is not None
    if asked:
        fields.update(blocked_reason=None, blocked_at=None)
    n = Agent.update_where(fields, agent.id, status=frm)
    if not n:
        return False
    for k, v in fields.items():
        setattr(agent, k, v)
    payload = {"from": frm, "to": to, "path": agent.path, "provider": agent.provider}
    if getattr(agent, "turn", None) is not None:  # a view that opened mid-start keeps it
        payload["turn"] = agent.turn  # right (orcr top's TURN column)
    if exit_reason:
        payload["exit_reason"] = exit_reason
    payload.update(data)
    if stalled:  # every flag raised has its clearing event
        events.emit("agent.stalled", agent.uuid, path=agent.path, stalled=False, status=to)
    if asked:
        events.emit("agent.unblocked", agent.uuid, path=agent.path, why=f"now {to}", status=to)
    if to == S.ENDED:
        settle_send(agent, exit_reason)
    events.emit("agent.status", agent.uuid, **payload)
    if to == S.ENDED:
        step.release(agent.uuid)  # its group, if empty (else the sweep)
    return True


#: a send's steps that put keys into the pane (agents/delivery.py)
TYPING = ("prompt.paste_requested", "prompt.enter_requested")


def settle_send(agent: Agent, exit_reason: str | None) -> None:
    """An ending row's ``agent send`` still pending is settled by the end, in its
    transaction: its ``pending_prompt`` cleared, and its ``prompt.requested`` closed.

    Nothing typed yet: ``prompt.failed`` (the prompt never reached the program). Typing
    begun: ``prompt.applied`` with ``confirmed`` false (the program ended under it).
    Without this, a send whose delivery job had not run (queued, or cut off by a full
    disk) when the program exited kept its intent open for good (soak seed 2803). The
    delivery checks, inside each step's transaction, that its prompt is still pending
    before it types: after this, nothing is typed (agents/delivery.py)."""
    n = (
        Agent.update(pending_prompt=None)
        .where((Agent.id == agent.id) & Agent.pending_prompt.is_null(False))
        .execute()
    )
    if not n:
        return
    agent.pending_prompt = None
    mine = Event.agent == agent.uuid
    request = (
        Event.select(Event.seq)
        .where(mine & (Event.kind == "prompt.requested"))
        .order_by(Event.seq.desc())
        .limit(1)
        .scalar()
    ) or 0
    typed = Event.select().where(mine & Event.kind.in_(TYPING) & (Event.seq > request)).exists()
    said = {"path": agent.path, "turn": agent.turn, "request": request or None}
    if typed:
        events.emit("prompt.applied", agent.uuid, **said, confirmed=False, ended=exit_reason)
    else:
        error = f"the prompt was not delivered: the agent ended ({exit_reason}) first"
        events.emit("prompt.failed", agent.uuid, **said, error=error)


def update(agent: Agent, event_kind: str | None = None, **fields) -> None:
    """Record non-status facts (pane ids, session pointer) with an optional event."""
    Agent.update_where(fields, agent.id)
    for k, v in fields.items():
        setattr(agent, k, v)
    if event_kind:
        events.emit(event_kind, agent.uuid, path=agent.path, **fields)


_HOLDERS = (
    "SELECT id FROM agent WHERE pane_id = ? AND id != ? "
    f"AND status IN ('{S.WORKING.value}', '{S.IDLE.value}')"
)


def release_reused(agent: Agent, pane_id: str) -> int:
    """Before ``agent``'s new pane is recorded: every other live row still holding
    ``pane_id`` goes ``lost``; returns how many.

    A multiplexer hands out only an id no pane has, so such a row's pane is gone:
    its server was killed and numbers panes afresh (tmux's ``%N``; herdr's
    ``wN:pM`` after a SIGKILL before it saved), and the monitor had not looked yet.
    Left holding the id, anything orcr addresses to it by pane id (a press that
    confirms its prompt, a close) would reach the new agent's pane (soak seed
    2812: a task's verifier, its first Enter unconfirmed, still ``working`` on
    ``w62:p2`` when another agent's start was given ``w62:p2``). ``lost`` here, in
    the transaction that records the new pane, is what the monitor decides a poll
    later anyway: it finds the row again by its launch token, or ends or resumes it.
    """
    # plain SQL (every start asks; almost always none): the rows only when there are some
    ids = db.execute_sql(_HOLDERS, (pane_id, agent.id)).fetchall()
    holders = [Agent.get_by_id(i) for (i,) in ids]
    why = "its pane is gone: the multiplexer gave the pane's id to a new pane (restarted)"
    return sum(bool(transition(other, S.LOST, pane_id=pane_id, why=why)) for other in holders)


def place(agent: Agent, event_kind: str | None, pane, **fields) -> None:
    """Record where ``agent``'s pane now stands: ``pane``'s (a PaneRef or a
    snapshot's PaneInfo) pane, tab and workspace ids, with any other ``fields``."""
    update(
        agent,
        event_kind,
        pane_id=pane.pane_id,
        tab_id=pane.tab_id,
        workspace_id=pane.workspace_id,
        **fields,
    )


def serve_sandbox(server: ServerContext, uuid: str, policy: dict | None) -> None:
    """Before a sandboxed agent's pane starts: the server listens on the agent's own
    socket (orcr_core/server/agent_sockets.py), its only way to orcr."""
    sockets = getattr(server, "agent_sockets", None)
    if policy and sockets is not None:
        sockets.ensure(uuid, policy.get("socket_dir"))
