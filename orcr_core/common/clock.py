"""The clock seam: the wall clock, the monotonic clock and sleep, behind one switch.

The server's timers (the stuck-start guard, a turn's timeout, idle GC, parking, the
stalled flag), the monitor that fires them, the timestamps the lifecycle writes
(``idle_since``, ``turn_started_at``, ``last_progress_at``) and the loop scheduler
read time through :func:`time`, :func:`monotonic` and :func:`sleep` here instead of
the :mod:`time` module. In production they are the :mod:`time` module's own. A test
swaps in a :class:`FakeClock` (:func:`use`, or the ``fake_clock`` fixture of
``orcr_testing``) and *advances* time instead of waiting it out: an hour of GC
costs nothing, and a deadline is met to the millisecond it was computed for.

The seam covers the process it is set in: a test that starts a real server process
runs it on the real clock (those are the end-to-end tests, one per behaviour).
Thread waits on a :class:`threading.Condition` or :class:`threading.Event` still use
the real clock; the in-process tests call the monitor's step directly instead of
its thread. A leaf: it imports nothing of orcr's.
"""

from __future__ import annotations

import threading
import time as _time
from contextlib import contextmanager

TYPE_CHECKING = False  # typing costs milliseconds at every CLI start
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Protocol

    class Clock(Protocol):
        def time(self) -> float: ...
        def monotonic(self) -> float: ...
        def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """The real clocks: :func:`time.time`, :func:`time.monotonic`, :func:`time.sleep`."""

    time = staticmethod(_time.time)
    monotonic = staticmethod(_time.monotonic)
    sleep = staticmethod(_time.sleep)


class FakeClock:
    """A clock that moves only when told: :meth:`advance`, or :meth:`sleep` (which
    advances by the slept time at once). Wall and monotonic time move together;
    ``start`` is the wall time it begins at (monotonic begins at 1000.0, an arbitrary
    origin, as the real one's is)."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self._lock = threading.Lock()
        self._wall = float(start)
        self._mono = 1000.0
        self.slept: list[float] = []  # every sleep asked of it, in order

    def time(self) -> float:
        with self._lock:
            return self._wall

    def monotonic(self) -> float:
        with self._lock:
            return self._mono

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.advance(max(0.0, seconds))

    def advance(self, seconds: float) -> None:
        """Move both clocks forward ``seconds`` (never back: a test of a clock jump
        sets the wall time with :meth:`set_wall`)."""
        if seconds < 0:
            raise ValueError(f"advance({seconds}): a fake clock moves forward; use set_wall")
        with self._lock:
            self._wall += seconds
            self._mono += seconds

    def set_wall(self, wall: float) -> None:
        """Set the wall clock alone (a clock jump: NTP, a suspend); monotonic stays."""
        with self._lock:
            self._wall = float(wall)


_clock: Clock = SystemClock()


def time() -> float:
    """Seconds since the epoch, from the clock in use."""
    return _clock.time()


def monotonic() -> float:
    """A monotonic reading, from the clock in use."""
    return _clock.monotonic()


def sleep(seconds: float) -> None:
    """Sleep ``seconds`` on the clock in use (a fake clock advances instead)."""
    _clock.sleep(seconds)


def current() -> Clock:
    """The clock in use."""
    return _clock


@contextmanager
def use(clock: Clock) -> Iterator[Clock]:
    """Run the block on ``clock`` (a :class:`FakeClock`), then restore the one before."""
    global _clock
    before, _clock = _clock, clock
    try:
        yield clock
    finally:
        _clock = before
