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

Several agents given one prompt in one folder (issue 33 item 7) all match one
search: a rollout is taken for an agent only if no other live agent's process
holds it open (:func:`holders`, read from ``/proc``: Codex keeps its rollout open
while it runs), and a session the agent's own process reports (with its launch
token) replaces one that another agent's process holds or another agent records.
An agent that recorded a session another agent's process then reports loses it
(:func:`release`) and searches again. The prompt is matched as a whole message:
``hello 1`` is not found in ``hello 10`` (the cause of the race seen in
``test_codex_parallel_sessions``, whose prompts were ``hello 0`` to ``hello 23``).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import TYPE_CHECKING

from orcr_core.agents import lifecycle
from orcr_core.agents.launch import launch_info, launch_spec
from orcr_core.contracts import SessionPointer
from orcr_core.kit.adapter_helpers import prompt_search
from orcr_core.store.models import Agent, db

if TYPE_CHECKING:
    from orcr_core.server.context import ServerContext

log = logging.getLogger("orcr.sessions")

#: how much of a transcript is searched for the prompt (it is near the start)
SEARCH_BYTES = 4 * 1024 * 1024


def holds_prompt(path: str, prompt: str) -> bool:
    """Whether the transcript at ``path`` shows ``prompt`` (a whole JSON string)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return prompt_search(prompt)(f.read(SEARCH_BYTES))
    except OSError:
        return False


#: seconds one pass over ``/proc`` serves the session searches' "another agent holds
#: it" (every delivering agent searches every 0.25 s, each search up to 8 candidates: a
#: pass each was 24 agents x 8 passes over every process, 1-1.5 s a pass at load 80)
OPEN_FILES_TTL = 0.5
_open_lock = threading.Lock()
_open_files: tuple[float, dict[str, set[str]]] = (-1e9, {})


def open_files(since: float) -> dict[str, set[str]]:
    """``ORCR_ID`` -> the paths (real) that processes with it in their environment hold
    open, from a pass over ``/proc`` that started at ``since`` (monotonic) or later:
    concurrent callers wait for one pass rather than each making one. Empty where
    ``/proc`` cannot tell (another OS)."""
    global _open_files
    with _open_lock:
        started, table = _open_files
        if started >= since:
            return table
        started = time.monotonic()
        table = _scan_open_files()
        _open_files = (started, table)
        return table


def _orcr_id(pid: str) -> str | None:
    """The ``ORCR_ID`` in process ``pid``'s environment, or None (none, gone, or
    another user's)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = f.read()
    except OSError:
        return None
    at = env.find(b"ORCR_ID=")
    if at < 0 or (at > 0 and env[at - 1] != 0):
        return None
    return env[at + 8 :].split(b"\0", 1)[0].decode(errors="replace")


def _scan_open_files() -> dict[str, set[str]]:
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return {}
    table: dict[str, set[str]] = {}
    for pid in pids:
        uuid = _orcr_id(pid)
        if uuid is None:
            continue
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        files = table.setdefault(uuid, set())
        for fd in fds:
            try:
                files.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
            except OSError:
                continue
    return table


def holders(path: str, among: set[str], max_age: float = 0.0) -> set[str]:
    """The agents of ``among`` (uuids) one of whose processes holds ``path`` open: a
    process whose environment's ``ORCR_ID`` is one of them, with ``path`` among its
    open files. A holder found in a shared pass (:func:`open_files`) up to ``max_age``
    seconds old is one (a TUI keeps its transcript open while it runs); "nobody" is
    only ever read afresh, by this call's own pass, as before the shared one existed.
    Empty where ``/proc`` cannot tell (another OS, a closed file)."""
    if max_age > 0:
        try:
            real = os.path.realpath(path)
        except OSError:
            return set()
        since = time.monotonic() - max_age
        found = {u for u, files in open_files(since).items() if u in among and real in files}
        if found:
            return found
    return _holders_now(path, among)


def _holders_now(path: str, among: set[str]) -> set[str]:
    """The agents of ``among`` (uuids) one of whose processes holds ``path`` open: a
    process whose environment's ``ORCR_ID`` is one of them, with ``path`` among its
    open files. Empty where ``/proc`` cannot tell (another OS, a closed file)."""
    try:
        real = os.path.realpath(path)
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return set()
    found: set[str] = set()
    for pid in pids:
        uuid = _orcr_id(pid)
        if uuid is None or uuid not in among or uuid in found:
            continue
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == real:
                    found.add(uuid)
                    break
            except OSError:
                continue
    return found


def _live() -> set[str]:
    return {a.uuid for a in Agent.select(Agent.uuid).where(Agent.status != "ended")}


def replaces(server: ServerContext, agent: Agent, pointer: SessionPointer) -> bool:
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
    if not (prompt.strip() and holds_prompt(new, prompt)):
        return False
    if not holds_prompt(old, prompt):
        return True
    # both received the prompt (one prompt, several agents, one folder): the agent's
    # own report wins over a session another agent records or another's process holds
    if _shared(agent, agent.agent_session_value):
        return True
    return bool(holders(old, _live() - {agent.uuid}))


def _shared(agent: Agent, value: str) -> bool:
    """Another live agent records the session ``value`` too."""
    return (
        Agent.select()
        .where(
            (Agent.id != agent.id)
            & (Agent.status != "ended")
            & (Agent.agent_session_value == value)
        )
        .exists()
    )


def release(agent: Agent, value: str) -> list[Agent]:
    """Other live agents that record ``value``, which ``agent``'s own process just
    reported: their record was a search's guess; it is dropped, so they search again.

    Call inside the caller's write transaction."""
    dropped = []
    for other in Agent.select().where(
        (Agent.id != agent.id) & (Agent.status != "ended") & (Agent.agent_session_value == value)
    ):
        log.warning("agent %s: session %s is %s's; searching again", other.path, value, agent.path)
        lifecycle.update(
            other,
            "agent.session",
            agent_session_source=None,
            agent_session_kind=None,
            agent_session_value=None,
        )
        dropped.append(other)
    return dropped


#: seconds between two transcript searches for one agent (find_session)
SCAN_EVERY = 2.0


def discover(
    server: ServerContext,
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
        pointer = _find_own(server, provider, find, agent, prompt, taken)
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


def _find_own(server: ServerContext, provider, find, agent: Agent, prompt: str, taken: set[str]):
    """``find``'s answer, skipping sessions another live agent's process holds open
    (the same prompt given to several agents in one folder matches all of them)."""
    spec = launch_spec(server, agent)
    others: set[str] | None = None
    for _ in range(8):
        pointer = find(spec, prompt, agent.started_at or 0.0, frozenset(taken))
        if pointer is None:
            return None
        path = provider.locate_transcript(pointer, spec)
        if others is None:
            others = _live() - {agent.uuid}
        if path is None or not holders(path, others, OPEN_FILES_TTL):
            return pointer
        log.info("agent %s: %s is another agent's; skipped", agent.path, pointer.value)
        taken.add(pointer.value)
    return None
