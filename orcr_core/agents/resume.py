"""``orcr agent resume``: start a lost or exited agent again, in its own session.

The row itself goes back to ``queued`` (same uuid, same path, same data dir and
transcript) with a fresh launch token, so a pane of its earlier life, should one
reappear, is never taken for the new one. It is promoted FIFO under the caps
like any start; the pipeline then launches the provider's ``resume_argv`` (the
recorded argv, env and cwd plus the provider's resume flag for the recorded
session) and types no prompt: the agent continues where it stopped.

Never doubled: the requeue is one guarded UPDATE from the status the row was
read in, and the active-path index refuses it while another agent holds the path.
"""

from __future__ import annotations

import logging
import secrets
import time
from typing import TYPE_CHECKING

from peewee import IntegrityError

from orcr_core.agents import lifecycle, transcripts
from orcr_core.store import events
from orcr_core.store.models import Agent, db

if TYPE_CHECKING:
    from orcr_core.server.context import ServerContext

log = logging.getLogger("orcr.resume")

#: seconds: a resumed agent lost again sooner than this after its start is not
#: resumed automatically again (a resume that cannot hold, e.g. a session the
#: provider refuses, must not start TUIs in a loop); ``agent resume`` still can
RESUME_SETTLE = 60.0

#: exit reasons after which the agent's own process is gone and may be resumed
RESUMABLE_ENDS = ("lost", "exited")


class ResumeError(Exception):
    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


def supports_resume(provider) -> bool:
    return callable(getattr(provider, "resume_argv", None))


def resume(server: ServerContext, agent: Agent, auto: bool = False) -> Agent:
    """Put ``agent`` back in the queue to be resumed; raise :class:`ResumeError` if not possible.

    ``auto``: ``[recovery] resume_lost`` did it, not ``agent resume`` (said in the event).
    Called inside a caller's transaction, the requeue is a savepoint of it."""
    provider = server.registry.providers.get(agent.provider)
    if provider is None or not supports_resume(provider):
        raise ResumeError(
            "resume_unsupported",
            f"provider {agent.provider!r} cannot resume an agent (its adapter has no "
            f"resume_argv); start a new one: orcr agent run -p {agent.provider}",
        )
    with db.atomic("IMMEDIATE"):
        agent = Agent.get_by_id(agent.id)
        resumable = agent.status == "lost" or (
            agent.status == "ended" and agent.exit_reason in RESUMABLE_ENDS
        )
        if not resumable:
            now = agent.status + (f" ({agent.exit_reason})" if agent.exit_reason else "")
            raise ResumeError(
                "not_resumable",
                f"agent {agent.path} is {now}; only a lost agent or one that ended "
                f"lost or exited can be resumed",
            )
        if not agent.agent_session_value:
            raise ResumeError(
                "no_session",
                f"agent {agent.path} has no recorded {agent.provider} session to resume",
            )
        if agent.status == "ended" and agent.worktree_state in ("requested", "created"):
            raise ResumeError(
                "worktree_busy",
                f"agent {agent.path} ended a moment ago and its checkout is still being "
                "kept or removed; try again in a moment",
            )
        last = db.execute_sql("SELECT MAX(queue_seq) FROM agent").fetchone()[0] or 0
        fields = dict(
            status="queued",
            queue_seq=last + 1,
            launch_token=secrets.token_hex(16),
            workspace_id=None,
            tab_id=None,
            pane_id=None,
            pane_process=None,
            resume_reported=None,
            parked_at=None,  # a new pane starts in its workspace
            unparked_at=None,
            move_state=None,
            exit_reason=None,
            error=None,
            ended_at=None,
            started_at=None,
            last_progress_at=None,
            idle_since=None,
            turn_started_at=None,
            cancel_requested=False,
            resumes=(agent.resumes or 0) + 1,
            # the replaced launch is over: a pane herdr restores with its token is late
            past_tokens=" ".join(t for t in (agent.past_tokens, agent.launch_token) if t) or None,
        )
        if agent.worktree_state == "kept":
            fields["worktree_state"] = "created"  # it runs in its kept checkout again
        elif agent.worktree_state == "removed":
            # made again on its branch from its base commit (it held nothing new)
            fields["worktree_state"] = "requested"
        try:
            n = (
                Agent.update(**fields)
                .where((Agent.id == agent.id) & (Agent.status == agent.status))
                .execute()
            )
        except IntegrityError:
            raise ResumeError(
                "path_in_use",
                f"path {agent.path!r} is in use by another active agent; kill it first",
            ) from None
        if not n:
            raise ResumeError("not_resumable", f"agent {agent.path} changed meanwhile; try again")
        events.emit(
            "agent.status",
            agent.uuid,
            **{"from": agent.status, "to": "queued", "path": agent.path},
            provider=agent.provider,
            queue_seq=fields["queue_seq"],
            resume=True,
            **({"auto": True} if auto else {}),
        )
    server.notify()
    return Agent.get_by_id(agent.id)


def auto_resume(server: ServerContext, agent: Agent) -> bool:
    """``[recovery] resume_lost``: an agent about to end ``lost`` is resumed instead.

    Call inside the caller's transaction, in place of the transition to ``ended
    (lost)``: the requeue is a savepoint of it, so a crash leaves the row either
    as it was (resolved again after the restart) or queued, never both. False
    (and the caller ends it ``lost``) when resume_lost is off or the agent
    cannot be resumed."""
    if not server.config.get("recovery.resume_lost"):
        return False
    if agent.resumes and agent.started_at and time.time() - agent.started_at < RESUME_SETTLE:
        log.warning(
            "agent %s lost again %.0fs after it was resumed: not resumed automatically "
            "again (orcr agent resume %s does it by hand)",
            agent.path,
            time.time() - agent.started_at,
            agent.path,
        )
        return False
    try:
        resume(server, agent, auto=True)
    except ResumeError as exc:
        log.info("agent %s lost, not resumed (%s): %s", agent.path, exc.code, exc)
        return False
    return True


def send_refusal(agent: Agent) -> str:
    """Why ``agent.send`` refuses a prompt to a non-idle agent, and what can help
    (``agent wait`` cannot help an ended or lost agent: resume can, or a new one)."""
    head = f"agent {agent.path} is {agent.status}"
    if agent.status == "ended":
        if agent.exit_reason in RESUMABLE_ENDS:
            return (
                f"{head} ({agent.exit_reason}) and takes no prompt; start it again in its own "
                f"session with orcr agent resume {agent.path}, then send"
            )
        return (
            f"{head} ({agent.exit_reason}) and takes no prompt; start a new agent (orcr agent run)"
        )
    if agent.status == "lost":
        return f"{head}: its pane is gone; orcr agent resume {agent.path} starts it again"
    return f"{head}; send needs an idle agent: orcr agent wait {agent.path}, then send"


#: turn_error of a turn the agent was working on when its pane was lost
LOST_MID_TURN = (
    "the agent was lost during this turn and resumed without finishing it; "
    "send the prompt again (orcr agent send)"
)


def _never_reached(turn: int) -> str:
    return (
        f"the prompt sent as turn {turn} never reached the agent: it was lost before the "
        "prompt was submitted, and its session does not have it; send the prompt again "
        "(orcr agent send)"
    )


def lost_turn(server: ServerContext, agent: Agent, provider) -> dict:
    """How the turn a resumed agent was working on when it was lost ended, as the
    ``turn``/``turn_status``/``turn_error`` of its ``idle`` transition; {} when no
    turn was under way (every prompt's turn had ended) or the provider keeps no
    transcript (its turns have no recorded outcome).

    The resumed TUI is not asked to finish it and no prompt is typed again: the
    process that ran the turn is gone. The transcript says how it ended if it got
    that far (a turn that completed just before the loss keeps its answer);
    otherwise it was ``interrupted``.

    A transcript without the turn at all means its prompt never reached the program
    (lost before Enter, or before the program wrote it down): the resumed session
    knows one turn fewer than the row. ``session_turns`` then carries the session's
    count, and :func:`idle_after_loss` sets the row's turn back to it, as
    :func:`orcr_core.agents.delivery.undelivered` does for a prompt that could not be
    typed: otherwise every later turn would wait for a transcript turn that never comes."""
    if not provider.has_transcript or agent.turns_done >= agent.turn:
        return {}
    state = transcripts.read_transcript(server, agent)
    turns = state.turns if state is not None else ()
    if state is not None and len(turns) < agent.turn:
        return {
            "turn": agent.turn,
            "turn_status": "interrupted",
            "turn_error": _never_reached(agent.turn),
            "session_turns": len(turns),
        }
    turn = turns[agent.turn - 1] if len(turns) >= agent.turn else None
    if turn is not None and turn.status in ("completed", "errored"):
        outcome = {"turn": agent.turn, "turn_status": turn.status}
        if turn.error:
            outcome["turn_error"] = turn.error
        return outcome
    return {"turn": agent.turn, "turn_status": "interrupted", "turn_error": LOST_MID_TURN}


def idle_after_loss(agent: Agent, outcome: dict, reason: str, **extra) -> None:
    """In the caller's transaction: record how the lost turn ended (``outcome``, from
    :func:`lost_turn`) and make the agent ``idle`` (resumed, or restored by herdr)."""
    outcome = dict(outcome)
    if outcome:
        turns = outcome.pop("session_turns", agent.turn)
        lifecycle.update(
            agent,
            None,
            turn=turns,
            turns_done=turns,
            turn_status=outcome["turn_status"],
            turn_error=outcome.get("turn_error"),
        )
    lifecycle.transition(agent, "idle", reason=reason, **extra, **outcome)
