"""Which provider session an agent follows when its process reports more than one.

Codex picks its own thread id and reports it after each turn (its ``notify``
program). It was seen reporting two thread ids in a row, one of them with no
rollout file; taking the last report blindly left the agent ``working`` forever.
The rule: orcr follows the session whose transcript received the agent's prompt,
whatever order the ids come in. A newly reported session replaces the recorded
one only when its transcript exists and either the recorded one's does not, or
only the new one holds the agent's first prompt.

A provider whose reports can be missing or wrong for a while may offer
``find_session(spec, prompt, since, taken)``: Codex runs ``notify`` only after a
completed turn, so an interrupted first turn reports nothing of its own thread,
while Codex's title request (a thread with no rollout) completes and is
reported. The monitor asks it, at most every ``SCAN_EVERY`` seconds, for a
working agent whose recorded session has no transcript (or that has none), and
follows what it finds (:func:`discover`).
"""

from __future__ import annotations

import json
import logging
import time

from orcr_core.agents import lifecycle
from orcr_core.agents.launch import launch_info, launch_spec
from orcr_core.contracts import SessionPointer
from orcr_core.store.models import Agent, db

log = logging.getLogger("orcr.sessions")

#: how much of a transcript is searched for the prompt (it is near the start)
SEARCH_BYTES = 4 * 1024 * 1024


def holds_prompt(path: str, prompt: str) -> bool:
    """Whether the transcript at ``path`` shows ``prompt`` (as a JSON string)."""
    needle = json.dumps(prompt.strip(), ensure_ascii=False)[1:-1]
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return needle in f.read(SEARCH_BYTES)
    except OSError:
        return False


def replaces(server, agent: Agent, pointer: SessionPointer) -> bool:
    """Whether a reported session should replace the one ``agent`` records."""
    if not agent.agent_session_value:
        return True
    provider = server.registry.providers.get(agent.provider)
    if provider is None or not provider.has_transcript:
        return True
    try:
        spec = launch_spec(server, agent)
        new = provider.locate_transcript(pointer, spec)
        if new is None:
            log.info("agent %s: session %s has no transcript; kept", agent.path, pointer.value)
            return False
        current = SessionPointer(
            agent.agent_session_source, agent.agent_session_kind, agent.agent_session_value
        )
        old = provider.locate_transcript(current, spec)
    except (OSError, ValueError) as exc:
        log.warning("agent %s: cannot compare sessions: %s", agent.path, exc)
        return False
    if old is None:
        return True
    if old == new:
        return False
    try:
        prompt = launch_info(server, agent).get("prompt") or ""
    except (OSError, ValueError):
        prompt = ""
    return bool(prompt.strip()) and holds_prompt(new, prompt) and not holds_prompt(old, prompt)


#: seconds between two transcript searches for one agent (find_session)
SCAN_EVERY = 2.0


def discover(
    server,
    agent: Agent,
    now: float | None = None,
    prompt: str | None = None,
    every: float = SCAN_EVERY,
) -> bool:
    """Ask the provider's ``find_session`` for the session of a working agent whose
    transcript cannot be read (no session recorded, or one with no transcript);
    record it (``agent.session``) and return True when it found another one.

    Prompt delivery asks too, for a ``starting`` agent whose first prompt was just
    typed (``prompt``, looked for every ``every`` seconds): Codex reports its thread
    only after the turn, but its rollout holds the prompt as soon as it is accepted,
    so the turn is seen to start then, as Claude's is (issue 19 item 5)."""
    provider = server.registry.providers.get(agent.provider)
    find = getattr(provider, "find_session", None)
    if find is None or agent.status not in ("starting", "working"):
        return False
    now = time.time() if now is None else now
    scans = server.__dict__.setdefault("_session_scans", {})
    if now - scans.get(agent.uuid, 0.0) < every:
        return False
    scans[agent.uuid] = now
    try:
        prompt = prompt or launch_info(server, agent).get("prompt") or ""
        if not prompt.strip():
            return False
        taken = {
            a.agent_session_value
            for a in Agent.select(Agent.agent_session_value).where(
                (Agent.status != "ended") & Agent.agent_session_value.is_null(False)
            )
        }
        pointer = find(launch_spec(server, agent), prompt, agent.started_at or 0.0, taken)
    except (OSError, ValueError) as exc:
        log.warning("agent %s: session search failed: %s", agent.path, exc)
        return False
    if pointer is None or pointer.value == agent.agent_session_value:
        return False
    with db.atomic("IMMEDIATE"):
        current = Agent.get_by_id(agent.id)
        if current.status == "ended" or current.agent_session_value != agent.agent_session_value:
            return False  # changed meanwhile (a report came): the next poll looks again
        if (
            Agent.select()
            .where(
                (Agent.id != agent.id)
                & (Agent.status != "ended")
                & (Agent.agent_session_value == pointer.value)
            )
            .exists()
        ):
            return False  # another agent took it meanwhile (same prompt, same folder)
        lifecycle.update(
            current,
            "agent.session",
            agent_session_source=pointer.source,
            agent_session_kind=pointer.kind,
            agent_session_value=pointer.value,
        )
        agent.__data__.update(current.__data__)
    log.info("agent %s: found its session %s by its prompt", agent.path, pointer.value)
    server.notify()
    return True
