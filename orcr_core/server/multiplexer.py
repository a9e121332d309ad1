"""The server's multiplexer: its driver, whether it answers, its event stream.

``Multiplexer`` is a part of ``Server`` (``server.mux``, server/app.py), not a
mixin: it sees only what its constructor names (the current config, the registry,
the stop event) and tells the rest of the server about pane changes through the
callbacks ``follow_events`` is given. The driver is made on first use and retried
with backoff while none can run; ``ready`` keeps orcr's own multiplexer server
running and says why promotion waits when it does not answer; ``follow_events``
(a thread) follows the driver's event stream.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from orcr_core.common.backoff import Backoff
from orcr_core.contracts import Driver, DriverError, PaneEvents

if TYPE_CHECKING:
    from orcr_core.config import Config
    from orcr_core.pm.plugins import Registry

log = logging.getLogger("orcr.server")

MUX_BACKOFF_MIN, MUX_BACKOFF_MAX = 0.25, 5.0  # seconds between restarts of a dead multiplexer


class Multiplexer:
    """The driver, whether orcr's multiplexer answers, and its event stream.

    ``config`` is called for the configuration in force (a reload replaces it);
    ``stopping`` ends ``follow_events``.
    """

    def __init__(
        self, config: Callable[[], Config], registry: Registry, stopping: threading.Event
    ) -> None:
        self._config = config
        self._registry = registry
        self._stopping = stopping
        self._driver: Driver | None = None
        self._driver_error: str | None = None
        self.driver_info: dict | None = None
        self._driver_lock = threading.Lock()
        self._driver_retry_at = 0.0
        self._driver_backoff = Backoff(0.25, 5.0)
        self._mux_lock = threading.Lock()
        self._mux_error: str | None = None  # why the multiplexer is unreachable, if it is
        self._mux_retry_at = 0.0
        self._mux_backoff = Backoff(MUX_BACKOFF_MIN, MUX_BACKOFF_MAX)
        self.events_live = False  # the driver's event stream is connected
        self.resyncs = 0  # event streams that lost events and were resubscribed

    @property
    def driver(self) -> Driver | None:
        """The multiplexer driver, created on first use (None when none can run).

        While none can be had (herdr down, tmux missing) it is retried with
        backoff, from 0.25 s up to 5 s between attempts.
        """
        with self._driver_lock:
            if self._driver is None and time.monotonic() >= self._driver_retry_at:
                self._driver, self._driver_error = self._make_driver()
                if self._driver is None:
                    self._driver_retry_at = time.monotonic() + self._driver_backoff.next()
                else:
                    self._driver_backoff.reset()
            return self._driver

    @property
    def made(self) -> bool:
        """Whether a driver is made now (no attempt to make one)."""
        return self._driver is not None

    def ready(self) -> str | None:
        """None when orcr's multiplexer answers, else why not (the ``held`` reason).

        ``ensure_session`` starts orcr's own multiplexer server again when it
        is gone (herdr: ``herdr --session <name> server``). After a failure the
        next attempt waits, with backoff from 0.25 s up to 5 s, so a multiplexer
        that cannot start is not hammered; promotion waits meanwhile instead of
        starting agents in a dead driver.
        """
        drv = self.driver
        if drv is None:
            return f"multiplexer: no driver can run ({self._driver_error})"
        with self._mux_lock:
            if self._mux_error is not None and time.monotonic() < self._mux_retry_at:
                return self._mux_error
            try:
                drv.ensure_session()
            except Exception as exc:
                first = self._mux_error is None
                self._mux_error = (
                    f"multiplexer: {drv.name} does not answer and could not be started again "
                    f"({exc}); queued agents start when it answers"
                )
                self._mux_retry_at = time.monotonic() + self._mux_backoff.next()
                if first:
                    log.warning("%s", self._mux_error)
                return self._mux_error
            if self._mux_error is not None:
                log.info("multiplexer %s answers again", drv.name)
            self._mux_error = None
            self._mux_backoff.reset()
            return None

    def status(self) -> dict:
        drv = self.driver
        error = self._driver_error if drv is None else self._mux_error
        return {
            "name": drv.name if drv is not None else None,
            "healthy": drv is not None and self._mux_error is None,
            "error": error,
            "info": self.driver_info if drv is not None else None,  # version, protocol
        }

    def _make_driver(self) -> tuple[Driver | None, str | None]:
        from orcr_core.pm.drivers import choose_driver

        cfg = self._config()
        try:
            factory, _why = choose_driver(cfg, self._registry)
            drv = factory(cfg)
            drv.ensure_session()  # starts orcr's own multiplexer server when none answers
            self.driver_info = drv.handshake()
            return drv, None
        except Exception as exc:  # surfaced in server status; promotion waits
            log.warning("no driver: %s", exc)
            return None, str(exc)

    def reset(self) -> None:
        """Forget the driver (its configuration changed): the next use makes one."""
        with self._driver_lock:
            self._driver = None
            self._driver_retry_at = 0.0

    def follow_events(
        self,
        changed: Callable[[], None],
        live_changed: Callable[[], None],
        pane_exited: Callable[[str], None],
    ) -> None:
        """Follow the multiplexer's own event stream when its driver has one.

        Subscribe first, then read: every (re)subscription is acknowledged before
        the monitor takes the snapshot that follows (``on_start``), so a change
        between a snapshot and the subscription is never missed, whether the
        multiplexer replays old events to a new stream (herdr 0.8) or starts at
        the live edge (0.9). A stream that reports lost events (herdr 0.9.2's
        ``events_lost``) is a resync, not an outage: resubscribed at once, then a
        fresh snapshot compared with the rows; counted in ``monitor.resyncs``.

        Hints only (the snapshot stays the truth): every event that may have
        changed a pane makes the monitor take a snapshot and compare, and a
        ``pane_exited`` also tells it that a vanished pane's process ended by
        itself, so its agent ends ``exited`` rather than ``lost``. Pane ids are
        never reused while a multiplexer server lives, so replayed old events
        are harmless. While the stream is down the monitor polls snapshots
        every ``timings.poll_every``; a reconnect is followed by a snapshot.

        ``changed()``: a pane may have changed (the monitor snapshots);
        ``live_changed()``: ``events_live`` flipped; ``pane_exited(pane_id)``: the
        multiplexer saw that pane's process end.
        """
        backoff = Backoff(0.25, 5.0)

        def started() -> None:  # connected: from now on pane changes are announced
            self.events_live = True
            live_changed()

        while not self._stopping.is_set():
            drv = self.driver
            if not isinstance(drv, PaneEvents):
                if self._stopping.wait(5.0):
                    return
                continue
            try:
                for ev in drv.events(stop=self._stopping, on_start=started):
                    backoff.reset()
                    if ev.get("event") == "pane_exited":
                        pane_id = (ev.get("data") or {}).get("pane_id")
                        if pane_id:
                            pane_exited(pane_id)
                    changed()
            except DriverError as exc:
                if exc.code == "events_lost":
                    # not an outage: the stream lost events and was closed; subscribe
                    # again at once (the new acknowledgement takes a fresh snapshot)
                    self.resyncs += 1
                    log.info("multiplexer event stream lost events: resync %d", self.resyncs)
                    changed()
                    continue
                log.info("multiplexer event stream ended: %s", exc)
            except Exception as exc:  # the stream broke: reconnect with backoff
                log.info("multiplexer event stream ended: %s", exc)
            if self.events_live:
                self.events_live = False
                live_changed()
            if self._stopping.wait(backoff.next()):
                return
