"""One exponential backoff for orcr's retry loops.

A failed attempt waits :meth:`Backoff.next` (``first``, doubled after each
failure up to ``cap``); a success calls :meth:`Backoff.reset`. With
``give_up_after`` the loop asks :meth:`Backoff.expired` whether to stop
retrying, counted from when the Backoff was made. A leaf: it imports nothing of
orcr's, so the CLI client path (``orcr_core.sdk.client``) can use it cheaply.
"""

from __future__ import annotations

import time

TYPE_CHECKING = False  # typing costs milliseconds at every CLI start (sdk.client uses this)
if TYPE_CHECKING:
    from collections.abc import Callable


class Backoff:
    """Delays ``first``, ``2*first``, ... capped at ``cap``; an optional give-up time."""

    def __init__(
        self,
        first: float,
        cap: float,
        give_up_after: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        if first <= 0 or cap < first:
            raise ValueError(f"Backoff needs 0 < first <= cap, got first={first} cap={cap}")
        self.first, self.cap, self._clock = first, cap, clock
        self.delay = first
        self.give_up_at = None if give_up_after is None else clock() + give_up_after

    def next(self) -> float:
        """The delay to wait now; the one after it is doubled (up to ``cap``)."""
        delay = self.delay
        self.delay = min(delay * 2, self.cap)
        return delay

    def reset(self) -> None:
        """An attempt succeeded: the next failure waits ``first`` again."""
        self.delay = self.first

    def expired(self) -> bool:
        """True once ``give_up_after`` seconds have passed (never without one)."""
        return self.give_up_at is not None and self._clock() > self.give_up_at

    def after(self, failures: int) -> float:
        """The delay after ``failures`` failures, for a loop that keeps its own count
        (a durable attempt counter): ``min(first * 2**failures, cap)``."""
        return min(self.first * 2 ** min(failures, 64), self.cap)
