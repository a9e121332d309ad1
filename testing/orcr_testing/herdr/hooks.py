"""The emulator's test hooks: what a test may change or ask while it runs.

:class:`TestHooks` is a part of :class:`orcr_testing.herdr.emulator.Emulator` (its
``hooks``; the emulator's methods of the same names delegate to it). It sees the
emulator's lock, its session state and its serving part, nothing else; every hook
is thread-safe (it takes the lock).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

from orcr_testing.herdr.model import InputRecord, Pane
from orcr_testing.herdr.serving import Serving
from orcr_testing.herdr.session import SessionState


class TestHooks:
    """Thread-safe hooks for tests (see the :class:`Emulator` docstring)."""

    __test__ = False  # not a pytest test class

    def __init__(self, lock: threading.RLock, state: SessionState, serving: Serving):
        self.lock = lock
        self.state = state
        self.serving = serving

    def pane(self, pane_id: str) -> Pane:
        """The live :class:`Pane` object (KeyError when gone)."""
        with self.lock:
            return self.state.pane(pane_id)

    def panes(self) -> list[Pane]:
        with self.lock:
            return [p for ws in self.state.workspaces.values() for p in ws.panes()]

    def inputs(self, pane_id: str) -> list[InputRecord]:
        """Every write into the pane: what was sent, what reached the PTY."""
        with self.lock:
            return list(self.state.pane(pane_id).inputs)

    def screen(self, pane_id: str) -> str:
        """The pane's visible screen, as ``pane.read`` would give it."""
        with self.lock:
            return self.state.read_text(self.state.pane(pane_id), "visible", None)[0]

    def set_agent(self, pane_id: str, agent: str | None, status: str = "unknown") -> None:
        """Pretend detection recognised (or lost) an agent; emits ``pane_agent_detected``."""
        with self.lock:
            pane = self.state.pane(pane_id)
            pane.agent_authority = "hook" if agent else None
            self.state.set_agent(pane, agent, status)

    def zoom_tab(self, tab_id: str, zoomed: bool = True) -> None:
        """Zoom (or unzoom) a tab, as a user pressing herdr's zoom key would: a
        ``pane.move`` from or into it then answers ``changed: false``, ``zoomed_tab``."""
        with self.lock:
            tab = self.state.find_tab(tab_id)
            assert tab is not None, tab_id
            tab.zoomed = zoomed

    def set_agent_status(self, pane_id: str, status: str) -> None:
        """A status transition: only per-pane ``pane.agent_status_changed`` streams see it."""
        with self.lock:
            pane = self.state.pane(pane_id)
            if pane.agent_authority is None:
                pane.agent_authority = "hook"
            self.state.set_status(pane, status)

    def set_agent_session(
        self, pane_id: str, value: str, agent: str | None = None, source: str | None = None
    ) -> None:
        """Store an official session ref the way a SessionStart hook does: NO event."""
        with self.lock:
            pane = self.state.pane(pane_id)
            agent = agent or pane.agent or "claude"
            pane.agent_session = {
                "source": source or f"herdr:{agent}",
                "agent": agent,
                "kind": "id",
                "value": value,
            }
            self.state.mark_dirty()

    def clear_agent_session(self, pane_id: str) -> None:
        with self.lock:
            self.state.pane(pane_id).agent_session = None
            self.state.mark_dirty()

    def add_agent(
        self,
        agent: str = "claude",
        status: str = "idle",
        *,
        cwd: str | None = None,
        label: str | None = None,
    ) -> str:
        """A user's agent in this session: a new workspace whose pane (a real shell)
        herdr detects as ``agent`` in ``status``, labelled ``label``. Emits the
        events herdr would (validated). Returns the pane id."""
        with self.lock:
            _ws, _tab, pane = self.state.new_workspace(cwd or os.getcwd(), None, None, False)
            pane.label = (label or "").strip() or None
            pane.agent_authority = "hook"  # detection never overrides it
            self.state.set_agent(pane, agent, status)
            self.state.mark_dirty()
            return pane.pane_id

    def close_pane(self, pane_id: str) -> None:
        """The user closed the pane (``pane.close``): ``pane_closed``, its terminal gone."""
        with self.lock:
            self.state.remove_pane(self.state.pane(pane_id), exited=False)
            self.state.mark_dirty()

    def exit_agent(self, pane_id: str) -> None:
        """The agent process ended inside its pane: release it, drop its session ref."""
        with self.lock:
            pane = self.state.pane(pane_id)
            pane.agent_authority = None
            self.state.set_agent(pane, None, "unknown")

    def drop_connections(self, count: int = 1, when: str = "before") -> None:
        """Fault injection: close the next ``count`` connections without an answer.

        ``when="before"`` closes before reading the request (nothing happened);
        ``"after"`` reads and handles it, then closes without replying.
        """
        if when not in ("before", "after"):
            raise ValueError("when must be 'before' or 'after'")
        with self.lock:
            self.serving.drop.extend([when] * count)

    def mute(self) -> None:
        """Fault injection: an outage. Every connection is closed unanswered (its
        processes run on, existing event streams stay open) until :meth:`unmute`;
        ``muted_connections`` counts the requests refused meanwhile."""
        with self.lock:
            self.serving.muted = True

    def unmute(self) -> None:
        with self.lock:
            self.serving.muted = False

    def lose_events(self, open_streams: bool = True, next_subscriptions: int = 0) -> None:
        """Fault injection (herdr 0.9): as if subscribers fell behind the event ring.

        ``open_streams``: every open subscription answers ``events_lost`` (an error
        reply with its subscribe id) at its next wake and is closed;
        ``next_subscriptions``: that many new subscriptions do so right after their
        acknowledgement (lost "while its subscriptions are being initialized").
        On 0.8, which loses events silently, nothing is sent."""
        with self.lock:
            if open_streams:
                for stream in self.serving.streams:
                    stream.lost.set()
            self.serving.lose_next += next_subscriptions

    def before_subscribe(self, change: Callable[[], None]) -> None:
        """Fault injection: run ``change`` (a test hook such as :meth:`close_pane`) when
        the next ``events.subscribe`` arrives, before its subscription starts. On 0.9,
        whose subscriptions start at the live edge, that change is never delivered to
        it: only a client that takes its snapshot after the acknowledgement sees it
        (HERDR-0.9.md §4). 0.8 replays it from the ring."""
        with self.lock:
            self.serving.subscribe_changes.append(change)

    def corrupt_next_reply(self, mutate: Callable[[str, dict], dict]) -> None:
        """Fault injection: ``mutate(method, reply) -> reply`` for the next reply sent."""
        with self.lock:
            self.serving.reply_hooks.append(mutate)

    def retained_events(self) -> list[dict]:
        """The event ring as a new subscription would replay it (oldest first)."""
        return self.state.hub.retained()

    def publish(self, name: str, data: dict) -> dict:
        """Emit an arbitrary Envelope-A event (validated like the emulator's own)."""
        with self.lock:
            return self.state.emit(name, data)
