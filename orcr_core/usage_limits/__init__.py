"""Usage limits hold the queue: an agent whose CLI waits out its plan's usage limit.

Newer Claude Code releases do not stop at a usage limit: the turn waits, the pane shows
"Usage limit reached · continuing automatically at 7pm", and the CLI goes on by itself
at the reset. The transcript says nothing meanwhile, so the monitor's look at a quiet
working agent's screen (agents/asking.py) finds it through the provider's
``screen_state`` hook (``waiting``, kind ``usage_limit``). Then:

- the agent stays ``working`` and shows ``waiting: usage limit until 19:00``; it is
  never flagged stalled, blocked or idle, and its turn ends as usual once the CLI goes on;
- while any agent of a provider waits so, the queue promotes none of that provider's
  rows until the reset it shows (``held: usage limit claude until 19:00``): a new agent
  would start into the same wall. Other providers go on.
  ``[providers.<name>] hold_on_limit = false`` turns the hold off;
- ``agent.usage_limit`` (and ``agent.usage_limit_over``) events, and the notification
  rule ``usage_limit``.

Claude Code 2.1.332 on a plan ends the turn on its limit first, then waits at its
composer to go on: orcr_core/agents/limit_wait.py keeps that agent working, waiting, while
its screen says so.

The waits are kept in memory, not in the store: after a restart the monitor reads the
quiet agents' screens again within ``timings.blocked_after``, which finds them again.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from orcr_core.store import events
from orcr_core.store.models import Agent, db

if TYPE_CHECKING:
    from orcr_core.server.context import ServerContext

#: a wait with no reset on screen holds its provider this long past its last sighting
UNKNOWN_RESET_HOLD = 300.0


@dataclass
class Wait:
    provider: str
    reason: str  # "usage limit until 19:00"
    until: float | None  # the reset the screen shows (Unix seconds)
    seen: float  # when the screen last showed it
    since: float  # when it was first seen
    ended: bool = False  # the turn ended on the limit (Codex): holds with no agent waiting


class Limits:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waits: dict[str, Wait] = {}  # agent uuid -> its wait

    # -- what the monitor finds ----------------------------------------------------------
    def seen(self, server: ServerContext, agent: Agent, reason: str, until: float | None) -> None:
        """The screen of working ``agent`` shows it waiting out a usage limit."""
        now = time.time()
        with self._lock:
            old = self._waits.get(agent.uuid)
            since = old.since if old is not None else now
            self._waits[agent.uuid] = Wait(agent.provider, reason, until, now, since)
        if old is not None and old.reason == reason:
            return
        self._announce(server, agent, reason, until)

    def turn_error(self, server: ServerContext, agent: Agent, provider, error: str) -> None:
        """A turn ended on ``error``: when the provider's optional ``usage_limit(error)``
        hook reads a usage limit in it (Codex ends the turn there), hold the provider's
        queue until the reset it names, though no agent waits."""
        hook = getattr(provider, "usage_limit", None)
        shown = hook(error) if hook is not None else None
        if shown is None:
            return
        now, reason = time.time(), shown.reason or "usage limit"
        with self._lock:
            self._waits[agent.uuid] = Wait(agent.provider, reason, shown.until, now, now, True)
        self._announce(server, agent, reason, shown.until, turn_ended=True)

    def _announce(self, server: ServerContext, agent: Agent, reason: str, until, **extra) -> None:
        """The ``agent.usage_limit`` event (with whether the provider's queue is held)."""
        with db.atomic():
            events.emit(
                "agent.usage_limit",
                agent.uuid,
                path=agent.path,
                provider=agent.provider,
                reason=reason,
                until=until,
                hold=self._holds(server, agent.provider),
                **extra,
            )
        server.notify()

    def over(self, server: ServerContext, agent: Agent, why: str) -> None:
        """The wait is over: the transcript moved on, the line left the screen, the turn ended."""
        with self._lock:
            if self._waits.pop(agent.uuid, None) is None:
                return
        with db.atomic():
            events.emit("agent.usage_limit_over", agent.uuid, path=agent.path, why=why)
        server.notify()

    def waiting(self, uuid: str) -> str | None:
        with self._lock:
            w = self._waits.get(uuid)
        return w.reason if w and not w.ended else None

    def noticed(self, uuid: str) -> float | None:
        """When the agent was first seen waiting out a limit; None when it is not."""
        with self._lock:
            w = self._waits.get(uuid)
        return w.since if w and not w.ended else None

    # -- what the queue asks -------------------------------------------------------------
    @staticmethod
    def _holds(server: ServerContext, provider: str) -> bool:
        return bool(server.config.provider_options(provider).get("hold_on_limit", True))

    def _live(self, now: float) -> dict[str, Wait]:
        """The waits that still hold: their agent still working, their reset not past."""
        with self._lock:
            waits = dict(self._waits)
        if not waits:
            return {}
        working = {
            a.uuid
            for a in Agent.select(Agent.uuid).where(
                Agent.uuid.in_(list(waits)) & (Agent.status == "working")
            )
        }
        with self._lock:
            for uuid in set(waits) - working:  # ended, idle, killed: nothing waits there
                if not waits[uuid].ended or self._end(waits[uuid]) <= now:
                    self._waits.pop(uuid, None)
        return {u: w for u, w in waits.items() if (u in working or w.ended) and self._end(w) > now}

    @staticmethod
    def _end(w: Wait) -> float:
        return w.until or w.seen + UNKNOWN_RESET_HOLD

    def held(self, server: ServerContext, now: float | None = None) -> dict[str, str]:
        """``{provider: reason}`` for each provider whose queue a usage limit holds."""
        now = time.time() if now is None else now
        out: dict[str, tuple[float, str]] = {}
        for w in self._live(now).values():
            if not self._holds(server, w.provider):
                continue
            end = w.until or w.seen + UNKNOWN_RESET_HOLD
            if w.provider not in out or end > out[w.provider][0]:
                clock = (
                    f" until {time.strftime('%H:%M', time.localtime(w.until))}" if w.until else ""
                )
                out[w.provider] = (end, f"usage limit {w.provider}{clock}")
        return {p: reason for p, (_end, reason) in out.items()}

    def wake_at(self, now: float | None = None) -> float | None:
        """When the next hold lifts by itself (a reset time), for the queue worker."""
        now = time.time() if now is None else now
        ends = [w.until or w.seen + UNKNOWN_RESET_HOLD for w in self._live(now).values()]
        return min(ends) if ends else None
