"""A second witness of a turn end: the multiplexer's own (herdr 0.9.2's ``completion_seq``).

The transcript stays the source of truth: a turn ends when the provider's
transcript says so, never because the multiplexer does. herdr 0.9.2+ sets an
agent's ``completion_seq`` when it goes from working or blocked to idle and
clears it on every other status change; orcr compares the two and counts
(``server status`` ``monitor.turn_witness``):

* ``agreed``: the transcript ended a turn and herdr shows a completion it had
  not shown at the previous turn end, within :data:`GRACE` seconds;
* ``unwitnessed``: the transcript ended a turn and herdr showed none in time;
* ``herdr_only``: herdr showed a new completion while the transcript still said
  working for :data:`GRACE` seconds.

Only panes where herdr tracks an agent take part: a generic ``command`` agent,
an agent herdr does not recognise, herdr 0.8 or tmux has no such witness.
A disagreement is a debug signal (one of the two lags or misreads), never acted on.
"""

from __future__ import annotations

import threading
import time

#: seconds either witness may lag the other before they are said to disagree
GRACE = 5.0


class Witness:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.counts = {"agreed": 0, "unwitnessed": 0, "herdr_only": 0}
        self._seen: dict[str, tuple[bool, int | None]] = {}  # uuid -> (tracked, completion)
        self._used: dict[str, int] = {}  # uuid -> the completion that witnessed a turn end
        self._pending: dict[str, float] = {}  # uuid -> deadline of a turn end to witness
        self._early: dict[str, tuple[int, float]] = {}  # uuid -> (completion, first seen)

    def pending(self) -> bool:
        with self.lock:
            return bool(self._pending or self._early)

    def observe(self, uuid: str, status: str, tracked: bool, completion: int | None) -> None:
        """A snapshot showed the agent's pane (``tracked``: herdr has an agent there)."""
        now = time.monotonic()
        with self.lock:
            self._seen[uuid] = (tracked, completion)
            fresh = tracked and completion is not None and completion != self._used.get(uuid)
            if uuid in self._pending:
                if fresh:
                    self._witnessed(uuid, completion)
                elif now >= self._pending[uuid]:
                    del self._pending[uuid]
                    self.counts["unwitnessed"] += 1
            elif fresh and status == "working":
                first = self._early.get(uuid)
                if first is None or first[0] != completion:
                    self._early[uuid] = (completion, now)
                elif now - first[1] >= GRACE:
                    del self._early[uuid]
                    self._used[uuid] = completion
                    self.counts["herdr_only"] += 1
            else:
                self._early.pop(uuid, None)

    def turn_ended(self, uuid: str) -> None:
        """The transcript ended a turn: does herdr say so too (now or within GRACE)?"""
        with self.lock:
            self._early.pop(uuid, None)
            tracked, completion = self._seen.get(uuid, (False, None))
            if not tracked:
                return  # nothing there to witness it
            if completion is not None and completion != self._used.get(uuid):
                self._witnessed(uuid, completion)
            else:
                self._pending[uuid] = time.monotonic() + GRACE

    def forget(self, keep: set[str]) -> None:
        with self.lock:
            for d in (self._seen, self._used, self._pending, self._early):
                for uuid in set(d) - keep:
                    del d[uuid]

    def _witnessed(self, uuid: str, completion: int) -> None:
        self._pending.pop(uuid, None)
        self._used[uuid] = completion
        self.counts["agreed"] += 1
