"""One heap of per-agent deadlines (turn timeout, GC, park, stuck-start guard, stalled flag).

Deadlines are wall-clock instants computed from persisted timestamps
(``turn_started_at + timeout``, ``idle_since + timings.gc_after``,
``idle_since + timings.park_after``, ``last_progress_at + timings.max_starting``), so a server restart rebuilds the
same heap from the store and neither resets nor skips a clock. An entry is a
hint: when it falls due the monitor re-reads the row and acts only if the
deadline still holds; a moved deadline simply gets a new entry.
"""

from __future__ import annotations

import heapq
import threading


class Timers:
    def __init__(self) -> None:
        self._heap: list[tuple[float, str, str]] = []
        self._armed: set[tuple[float, str, str]] = set()
        self._agents: dict[str, int] = {}  # uuid -> its entries in the heap
        self._lock = threading.Lock()

    def arm(self, at: float, uuid: str, kind: str) -> None:
        """Schedule ``kind`` for ``uuid`` at ``at`` (once per distinct deadline)."""
        entry = (at, uuid, kind)
        with self._lock:
            if entry in self._armed:
                return
            self._armed.add(entry)
            self._agents[uuid] = self._agents.get(uuid, 0) + 1
            heapq.heappush(self._heap, entry)

    def arm_soonest(self, at: float, uuid: str, kind: str) -> None:
        """Like :meth:`arm`, unless an entry of the same ``uuid`` and ``kind`` is due no
        later: for a hint whose only effect is a step, which arms it again while it is
        still needed. Armed anew by every step, a plain entry ``at`` a moving instant
        (now + 1 s) made each step that fired it arm one more: steps grew by one poll
        rate every second (a herdr restore awaited for 10 s: ~200 snapshots a second)."""
        with self._lock:
            if any(e[1] == uuid and e[2] == kind and e[0] <= at for e in self._heap):
                return
        self.arm(at, uuid, kind)

    def next_at(self) -> float | None:
        with self._lock:
            return self._heap[0][0] if self._heap else None

    def due(self, now: float) -> list[tuple[str, str]]:
        """Pop every entry at or before ``now``: ``[(uuid, kind)]``."""
        out = []
        with self._lock:
            while self._heap and self._heap[0][0] <= now:
                entry = heapq.heappop(self._heap)
                self._armed.discard(entry)
                left = self._agents.pop(entry[1]) - 1
                if left:
                    self._agents[entry[1]] = left
                out.append((entry[1], entry[2]))
        return out

    def forget(self, keep: set[str]) -> None:
        """Drop the entries of agents not in ``keep`` (they ended); entries of no
        agent (uuid ``""``) stay. The monitor calls it after every reload: with no
        agent to drop the heap (every deadline an agent had since) is left alone."""
        with self._lock:
            gone = [u for u in self._agents if u and u not in keep]
            if not gone:
                return
            for u in gone:
                del self._agents[u]
            self._heap = [e for e in self._heap if not e[1] or e[1] in keep]
            heapq.heapify(self._heap)
            self._armed = set(self._heap)

    def __len__(self) -> int:
        with self._lock:
            return len(self._heap)
