"""herdr's event delivery: one ring of the last 512 events, streamed per subscription entry.

Faithful to ``src/api/event_hub.rs`` / ``server.rs::stream_subscriptions``.
herdr 0.8: every type-only entry starts at sequence 0 (a new subscription
replays what is still retained), the stream wakes every 100 ms and each entry
emits at most one event per wake; an entry that falls behind the ring loses
events silently. herdr 0.9 (HERDR-0.9.md §4): an entry starts at the sequence
current when the request was accepted (the live edge), pending events are
drained in bounded batches, and an entry that fell behind the ring makes the
stream answer ``events_lost`` and close (:meth:`TypeEntry.overrun`).
Per-pane status entries get their own queue and the dotted envelope.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from typing import Any

RING_SIZE = 512
TICK = 0.1

TYPE_ONLY = {
    "workspace.created",
    "workspace.updated",
    "workspace.metadata_updated",
    "workspace.renamed",
    "workspace.moved",
    "workspace.reordered",
    "workspace.closed",
    "workspace.focused",
    "worktree.created",
    "worktree.opened",
    "worktree.removed",
    "tab.created",
    "tab.closed",
    "tab.focused",
    "tab.renamed",
    "tab.moved",
    "pane.created",
    "pane.closed",
    "pane.updated",
    "pane.focused",
    "pane.moved",
    "pane.exited",
    "pane.agent_detected",
    "layout.updated",
}


def snake(kind: str) -> str:
    """``pane.agent_detected`` -> ``pane_agent_detected``."""
    return kind.replace(".", "_")


class EventHub:
    """The ring. ``publish`` is called by the emulator; entries read it from stream threads."""

    def __init__(self, size: int = RING_SIZE):
        self.lock = threading.Lock()
        self.ring: collections.deque[tuple[int, str, dict]] = collections.deque(maxlen=size)
        self.seq = 0
        self.status_entries: list[StatusEntry] = []

    def publish(self, name: str, data: dict) -> dict:
        """Append ``{"event": name, "data": {"type": name, ...}}``; returns the envelope."""
        envelope = {"event": name, "data": {"type": name, **data}}
        with self.lock:
            self.seq += 1
            self.ring.append((self.seq, name, envelope))
        return envelope

    def retained(self) -> list[dict]:
        with self.lock:
            return [env for _, _, env in self.ring]

    def push_status(self, pane_id: str, status: str, payload: dict) -> None:
        with self.lock:
            entries = list(self.status_entries)
        for entry in entries:
            if entry.pane_id == pane_id:
                entry.offer(status, payload)


class TypeEntry:
    def __init__(self, hub: EventHub, kind: str, live_edge: bool = False):
        self.hub, self.name = hub, snake(kind)
        with hub.lock:
            self.cursor = hub.seq if live_edge else 0

    def overrun(self) -> bool:
        """Events this entry has not looked at were evicted from the ring (the ring
        is shared by every type, so this holds even if none of them was its kind)."""
        with self.hub.lock:
            return bool(self.hub.ring) and self.hub.ring[0][0] > self.cursor + 1

    def next(self) -> dict | None:
        with self.hub.lock:
            for seq, name, envelope in self.hub.ring:
                if seq > self.cursor and name == self.name:
                    self.cursor = seq
                    return envelope
            if self.hub.ring:  # nothing of our kind: skip what we have seen
                self.cursor = max(self.cursor, self.hub.ring[-1][0])
        return None


class StatusEntry:
    """``pane.agent_status_changed`` for one pane, optionally filtered to one status."""

    def __init__(self, pane_id: str, status: str | None):
        self.pane_id, self.status = pane_id, status
        self.queue: collections.deque[dict] = collections.deque()
        self.lock = threading.Lock()

    def offer(self, status: str, payload: dict) -> None:
        if self.status is not None and status != self.status:
            return
        with self.lock:
            self.queue.append({"event": "pane.agent_status_changed", "data": dict(payload)})

    def next(self) -> dict | None:
        with self.lock:
            return self.queue.popleft() if self.queue else None


class OutputEntry:
    """``pane.output_matched``: emits when the first matching line of the read changes."""

    def __init__(self, pane_id: str, probe: Callable[[], tuple[str | None, dict] | None]):
        self.pane_id, self.probe = pane_id, probe
        self.last: str | None = None

    def next(self) -> dict | None:
        found = self.probe()
        if found is None:
            return None
        line, read = found
        if line is None or line == self.last:
            return None
        self.last = line
        data = {"pane_id": self.pane_id, "matched_line": line, "read": read}
        return {"event": "pane.output_matched", "data": data}


class QuietEntry:
    """``pane.scroll_changed``: a headless emulator never scrolls."""

    def next(self) -> dict | None:
        return None


Entry = Any
