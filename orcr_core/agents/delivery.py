"""Prompt delivery: the two-call rule, the turn's confirmation, and the first prompt
delivered exactly once across a crash.

The first prompt's paste and its Enter are separate intent/applied steps
(``prompt.paste_requested``/``prompt.paste_applied``,
``prompt.enter_requested``/``prompt.enter_applied``), each written before and after
its multiplexer call. A pipeline resumed after a crash decides from those steps and
from what the provider and the pane show, never by typing again blindly:

- the turn shows (the transcript, or the provider's session discovery finds a
  session holding the prompt, as Codex's rollout does before its thread is
  reported): nothing is typed;
- Enter was requested: the text left the composer for the model, or it still
  sits in an idle composer and Enter is pressed again on that evidence only
  (never the text; :mod:`orcr_core.agents.resubmit`);
- only the paste was requested: when it was applied or the screen shows the text,
  Enter alone is pressed; a paste that never reached the pane is made again.

So the model receives each prompt once: never doubled in one message, never as a
second user message. ``agent send`` (later turns) rides the same steps: its text is
written to the row (``pending_prompt``) in the transaction that records
``prompt.requested``, before anything is typed, and a restart resumes the delivery
from the row (:func:`resume_sends`); the column is cleared with ``prompt.applied``.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from typing import TYPE_CHECKING

from peewee import PeeweeException

from orcr_core.agents import dialogs, lifecycle, parking, resubmit, sessions, transcripts
from orcr_core.agents.exclusive import agent_lock
from orcr_core.agents.launch import pane_of
from orcr_core.contracts import DriverError, SplitPrompt
from orcr_core.store import events, faults
from orcr_core.store.models import Agent, db

if TYPE_CHECKING:
    from orcr_core.server.context import ServerContext

log = logging.getLogger("orcr.delivery")

#: seconds a paste a crash interrupted may take to show in the composer before it is
#: taken as never made: Claude Code 2.1 draws a paste 0.2-1.4 s after it arrives (on a
#: loaded machine), and pasting again meanwhile doubles the text
PASTE_SETTLE = 5.0

PASTE_REQUESTED = "prompt.paste_requested"
PASTE_APPLIED = "prompt.paste_applied"
ENTER_REQUESTED = "prompt.enter_requested"
ENTER_APPLIED = "prompt.enter_applied"


def _last_request(agent: Agent) -> int | None:
    """The seq of the agent's latest ``prompt.requested``: which prompt is current."""
    return events.last_of(agent.uuid, "prompt.requested")


_STEPS = "SELECT DISTINCT kind FROM event WHERE agent = ? AND kind LIKE 'prompt.%' AND seq >= ?"


def _steps(agent: Agent) -> set[str]:
    """The delivery steps recorded for this agent's latest prompt: the ``prompt.*``
    events from its last ``prompt.requested`` on (all of them before the first)."""
    last = _last_request(agent)
    rows = db.execute_sql(_STEPS, (agent.uuid, 0 if last is None else last))
    return {kind for (kind,) in rows}


def _record(agent: Agent, turn: int, *kinds: str, still=None) -> None:
    """The step events, in one transaction. ``still(agent)`` (a first prompt: the row
    is still starting) is asked inside it and raises to stop the delivery: an end
    committed meanwhile (the stuck-start guard, a kill) is seen before a key is sent."""
    with db.atomic("IMMEDIATE"):
        if still is not None:
            still(agent)
        for kind in kinds:
            events.emit(kind, agent.uuid, path=agent.path, turn=turn)


def first_prompt(server: ServerContext, agent: Agent, prompt: str, ready) -> bool | None:
    """Deliver turn 1 exactly once; whether the turn was seen to start (``confirmed``).

    ``ready()`` waits for the TUI's input before anything is typed; it returns False
    when a dialog asks a person first: then nothing is typed and this returns None
    (the monitor runs the pipeline again). Each step first checks the row is still
    starting: one ended meanwhile raises :class:`~orcr_core.agents.dialogs.Canceled`."""
    return _deliver_once(server, agent, prompt, 0, ready, still=dialogs.check)


def _deliver_once(
    server: ServerContext, agent: Agent, prompt: str, before: int, ready, still=None
) -> bool | None:
    """Turn ``before + 1``'s prompt, exactly once, resumed from its recorded steps."""
    steps = _steps(agent)
    if _turns_since(server, agent, before):
        return True  # the transcript shows the turn: it is not typed again
    if PASTE_REQUESTED in steps and sessions.discover(server, agent, prompt=prompt, every=0):
        return True  # the provider's session discovery found the prompt: its turn started
    if PASTE_REQUESTED not in steps:  # nothing was typed yet
        if not ready():
            return None
        if "prompt.requested" not in steps:
            _record(agent, before + 1, "prompt.requested", still=still)
        faults.point("before_prompt")
        return _type(server, agent, prompt, before, paste=True, still=still)
    if ENTER_REQUESTED in steps:
        # Enter may have landed: the text went to the model, or it sits in the
        # composer and the confirmation presses Enter again on that evidence
        # (agents/resubmit.py); the text itself is never typed twice. A provider
        # that reads no composer (none drawn, or no hook): pressed when the screen
        # shows the text (a server SIGKILLed between Enter's intent and the key left
        # the echo agent's text unsubmitted, its composer not read: the turn hung)
        log.info("agent %s: turn %d's Enter was requested before a restart", agent.path, before + 1)
        if resubmit.blind(server, agent, prompt) and _on_screen(server, agent, prompt):
            return _type(server, agent, prompt, before, paste=False, still=still)
        return confirm(server, agent, before, prompt)
    if PASTE_APPLIED in steps or _on_screen(server, agent, prompt, wait=PASTE_SETTLE):
        log.info("agent %s: turn %d's prompt already pasted: Enter only", agent.path, before + 1)
        return _type(server, agent, prompt, before, paste=False, still=still)
    log.info("agent %s: turn %d's paste never reached the pane: pasted", agent.path, before + 1)
    return _type(server, agent, prompt, before, paste=True, still=still)


def _type(
    server: ServerContext, agent: Agent, prompt: str, before: int, paste: bool, still=None
) -> bool:
    """The paste (unless ``paste`` is False) and the Enter, each between its intent
    and applied events; then the confirmation."""
    driver = server.driver
    pane = pane_of(agent)
    turn = before + 1
    # a driver with send_prompt only (no SplitPrompt): one step, recorded as both
    if not isinstance(driver, SplitPrompt):
        if paste:
            _record(agent, turn, PASTE_REQUESTED, ENTER_REQUESTED, still=still)
            driver.send_prompt(pane, prompt)
            _record(agent, turn, PASTE_APPLIED, ENTER_APPLIED)
        else:
            _record(agent, turn, ENTER_REQUESTED, still=still)
            driver.send_keys(pane, ["enter"])
            _record(agent, turn, ENTER_APPLIED)
        return confirm(server, agent, before, prompt)
    empty = resubmit.composer(server, agent, prompt) if paste else None
    if paste:
        _record(agent, turn, PASTE_REQUESTED, still=still)
        faults.point("before_paste")
        driver.paste_prompt(pane, prompt)
        faults.point("after_paste")
        _record(agent, turn, PASTE_APPLIED)
    drawn = resubmit.wait_drawn(server, agent, prompt, empty)  # the TUI read the paste
    _record(agent, turn, ENTER_REQUESTED, still=still)
    faults.point("before_enter")
    driver.submit_prompt(pane)
    faults.point("after_enter")
    _record(agent, turn, ENTER_APPLIED)
    return confirm(server, agent, before, prompt, drawn)


def _on_screen(server: ServerContext, agent: Agent, prompt: str, wait: float = 0.0) -> bool:
    """Whether the pane shows the prompt (whitespace ignored: a composer wraps it), or
    a TUI's placeholder for a pasted text; looked for during ``wait`` seconds."""
    deadline = time.monotonic() + wait
    while True:
        try:
            screen = server.driver.read(pane_of(agent))
        except DriverError:
            return False
        if resubmit.holds(screen, prompt, tail=True):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)


#: seconds between two searches for the transcript that received a prompt being delivered
FIND_EVERY = 0.25


def _turns_since(
    server: ServerContext, agent: Agent, turns_before: int, text: str | None = None
) -> bool | None:
    """Did a new turn start? None when nothing can tell (no transcript, no status).

    With no transcript known yet, the provider's ``find_session`` may find the one
    that received ``text`` (Codex: its rollout shows the prompt once accepted)."""
    agent = Agent.get_by_id(agent.id)  # the monitor may have captured the session meanwhile
    state = transcripts.read_transcript(server, agent)
    if state is None and text and sessions.discover(server, agent, prompt=text, every=FIND_EVERY):
        state = transcripts.read_transcript(server, Agent.get_by_id(agent.id))
    if state is not None:
        return len(state.turns) > turns_before
    provider = server.registry.providers.get(agent.provider)
    if provider is not None and provider.has_transcript:
        return False  # the transcript does not exist yet: no turn has started
    status = server.driver.agent_status(pane_of(agent)) if agent.pane_id else None
    if status is None:
        return None
    return status == "working"


def confirm(
    server: ServerContext, agent: Agent, turns_before: int, text: str, drawn: bool = True
) -> bool:
    """Wait for the turn to show; press Enter again only on evidence that the first
    did not land (:func:`orcr_core.agents.resubmit.confirm`; ``drawn``: the composer
    showed the prompt before the Enter)."""
    request = _last_request(agent)
    return resubmit.confirm(
        server,
        agent,
        text,
        started=lambda: _turns_since(server, agent, turns_before, text),
        over=lambda: _over(agent, turns_before, request),
        drawn=drawn,
    )


def _over(agent: Agent, turns_before: int, request: int | None) -> bool:
    """Whether the prompt being confirmed is no longer the agent's current one: the
    agent left ``starting``/``working`` (lost, restored idle), its turn was set back,
    or a later ``agent send`` requested another prompt."""
    now = Agent.get_by_id(agent.id)
    # a first prompt's row is counted at turn 1 once it is applied; a sent one at once
    turn = {"starting": turns_before, "working": turns_before + 1}.get(now.status)
    return now.turn != turn or _last_request(agent) != request


def send_prompt(server: ServerContext, agent: Agent, prompt: str, timeout: float | None) -> bool:
    """``agent send``: idle -> working now, deliver in the background. False, with
    nothing written, when the agent is not idle by the time its lock is held (an
    idle GC or a kill ended it meanwhile: :mod:`orcr_core.agents.exclusive`).

    The text is written to the row (``pending_prompt``) in the transaction that
    records ``prompt.requested``, before anything is typed: a restart after a crash
    resumes the delivery from it (:func:`resume_sends`)."""
    with agent_lock(agent.uuid), db.atomic("IMMEDIATE"):
        agent = Agent.get_by_id(agent.id)
        if agent.status != "idle":
            return False
        fields = {"turn": agent.turn + 1, "pending_prompt": prompt}
        if timeout is not None:
            fields["timeout"] = float(timeout)
        lifecycle.update(agent, None, **fields)
        events.emit("prompt.requested", agent.uuid, path=agent.path, turn=agent.turn)
        lifecycle.transition(agent, "working")
    server.start_pipeline(agent.uuid, send_job, queue_behind=True)
    return True


def resume_cut_off(server: ServerContext, agent: Agent) -> None:
    """Monitor: a pending prompt with no job delivering it was cut off by a store
    error (a full disk): deliver it again, from its steps."""
    if agent.pending_prompt is not None and not server.pipeline_active(agent.uuid):
        log.info("agent %s: resuming the delivery of its prompt", agent.path)
        server.start_pipeline(agent.uuid, send_job, queue_behind=True)


def resume_sends(server: ServerContext) -> None:
    """Server start: resume every ``agent send`` a crash left undelivered."""
    rows = list(
        Agent.select(Agent.uuid).where(
            (Agent.status == "working") & Agent.pending_prompt.is_null(False)
        )
    )
    for row in rows:
        log.info("agent %s: resuming the delivery of its prompt", row.uuid)
        server.start_pipeline(row.uuid, send_job, queue_behind=True)


def _pending(request: int | None):
    """A send's step guard (``still``): its prompt, requested at seq ``request``, is
    still the row's pending one. An end clears it in its own transaction
    (lifecycle.settle_send), so a step recorded after that raises
    :class:`~orcr_core.agents.dialogs.Canceled` and no key is sent."""

    def still(agent: Agent) -> None:
        now = Agent.get_by_id(agent.id)
        if now.pending_prompt is None or _last_request(now) != request:
            raise dialogs.Canceled(f"agent {now.path}: its prompt is no longer pending")

    return still


_LATER = "SELECT MIN(seq) FROM event WHERE agent = ? AND kind = 'prompt.requested' AND seq > ?"
_ENDINGS = (
    "SELECT seq, data FROM event "
    "WHERE agent = ? AND kind IN ('prompt.applied', 'prompt.failed') AND seq > ?"
)


def _settled(agent: Agent, request: int | None) -> bool:
    """Whether the prompt requested at seq ``request`` has its ``prompt.applied`` or
    ``prompt.failed`` already. Each names its request (``request``): the previous
    prompt's job often writes its own after the next send was requested (the turn
    ended, the client sent again, the job was still confirming), and taking that for
    this prompt's left it pending with no job for good (test_delivery, 1 run in 4).
    One written before requests were named counts if it came before the next request."""
    if request is None:
        return False
    later = db.execute_sql(_LATER, (agent.uuid, request)).fetchone()[0]
    for seq, data in db.execute_sql(_ENDINGS, (agent.uuid, request)).fetchall():
        named = json.loads(data).get("request")
        if named == request or (named is None and (later is None or seq < later)):
            return True
    return False


def send_job(server: ServerContext, uuid: str) -> None:
    """Deliver the row's pending prompt exactly once (resumed from its steps after a
    crash, or by the monitor after a store error cut this job off); then
    ``prompt.applied``, the pending prompt cleared.

    A store error (a full disk) is not a delivery failure: it is raised, the steps
    recorded so far stay, and the monitor runs this again (:func:`resume_cut_off`). By
    then the turn may have run and ended (``idle``): the steps and the transcript say
    so and nothing is typed again."""
    with db.atomic():  # one snapshot: the row's prompt and turn, and the request they go with
        a = Agent.get(Agent.uuid == uuid)
        prompt, turn, request = a.pending_prompt, a.turn, _last_request(a)
    if a.status not in ("working", "idle") or prompt is None:
        return  # delivered (or the agent moved on) meanwhile
    try:
        a = parking.unpark(server, a, "prompt")  # a parked agent comes back first
    except DriverError as exc:
        # the prompt reaches the pane wherever it is: an answer matters more
        log.warning("agent %s: not un-parked for its prompt: %s", a.path, exc)
    try:
        ok = _deliver_once(server, a, prompt, turn - 1, lambda: True, still=_pending(request))
        faults.point("after_prompt")
    except (PeeweeException, sqlite3.Error):
        raise  # the store, not the pane: resumed from its steps (see above)
    except dialogs.Canceled:
        log.info("agent %s: its prompt is no longer pending (the agent ended): not typed", a.path)
        return  # the end settled it (lifecycle.settle_send)
    except Exception as exc:  # noqa: BLE001 - any failure to type ends the turn
        log.warning("agent %s: prompt not delivered: %s", a.path, exc)
        if not (isinstance(exc, DriverError) and exc.code == "pane_dead"):
            undelivered(server, a, turn - 1, exc, request)
            return
        # the program died under the prompt: nothing was typed into a dead
        # pane, and the monitor ends the agent from its pane
        ok = False
    with db.atomic("IMMEDIATE"):
        a = Agent.get(Agent.uuid == uuid)
        if _settled(a, request):
            return  # the agent's end settled it meanwhile (lifecycle.settle_send)
        events.emit("prompt.applied", uuid, path=a.path, turn=turn, confirmed=ok, request=request)
        # only this prompt's: a turn set back after a loss reuses its number, and the
        # next send's prompt may be pending by now (its job queued behind this one)
        if a.pending_prompt is not None and _last_request(a) == request:
            lifecycle.update(a, None, pending_prompt=None)


def undelivered(
    server: ServerContext,
    agent: Agent,
    turns_before: int,
    exc: Exception,
    request: int | None = None,
) -> None:
    """A prompt the driver could not type (an error other than a dead pane) ends
    its turn ``errored``: the agent goes back to ``idle`` at the turn count it had
    (no turn reached the program), never left ``working`` for a turn that cannot come."""
    error = f"the prompt was not delivered: {exc}"
    with db.atomic("IMMEDIATE"):
        agent = Agent.get_by_id(agent.id)
        request = _last_request(agent) if request is None else request
        if _settled(agent, request):
            return  # the agent's end settled it meanwhile (lifecycle.settle_send)
        events.emit(
            "prompt.failed",
            agent.uuid,
            path=agent.path,
            turn=agent.turn,
            error=error,
            request=request,
        )
        if agent.status not in ("working", "idle") or agent.turn != turns_before + 1:
            return  # the agent moved on (ended, killed, sent again) meanwhile
        turn = agent.turn
        lifecycle.update(
            agent,
            None,
            turn=turns_before,
            turn_status="errored",
            turn_error=error,
            pending_prompt=None,
        )
        if agent.status == "working":  # (a program without a transcript may show idle first)
            lifecycle.transition(agent, "idle", turn=turn, turn_status="errored", turn_error=error)
    server.notify()
