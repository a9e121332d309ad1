"""Which provider session an agent follows when its process reports more than one.

Codex picks its own thread id and reports it after each turn (its ``notify``
program). It was seen reporting two thread ids in a row, one of them with no
rollout file; taking the last report blindly left the agent ``working`` forever.
The rule: orcr follows the session whose transcript received the agent's prompt,
whatever order the ids come in. A newly reported session replaces the recorded
one only when its transcript exists and either the recorded one's does not, or
only the new one holds the agent's first prompt.
"""

from __future__ import annotations

import json
import logging

from orcr_core.agents.launch import launch_info, launch_spec
from orcr_core.contracts import SessionPointer
from orcr_core.store.models import Agent

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
