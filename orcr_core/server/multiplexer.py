"""The server's multiplexer: its driver, whether it answers, its event stream.

``MultiplexerMixin`` is part of ``Server`` (server/app.py): the driver is made on
first use and retried with backoff while none can run; ``mux_ready`` keeps orcr's
own multiplexer server running and says why promotion waits when it does not
answer; ``mux_events_loop`` (a thread) follows the driver's event stream.
"""

from __future__ import annotations

import logging
import threading
import time

from orcr_core.common.backoff import Backoff
from orcr_core.contracts import DriverError

log = logging.getLogger("orcr.server")

MUX_BACKOFF_MIN, MUX_BACKOFF_MAX = 0.25, 5.0  # seconds between restarts of a dead multiplexer


class MultiplexerMixin:
    def init_multiplexer(self) -> None:
        self._driver = None
        self._driver_error: str | None = None
        self.driver_info: dict | None = None
        self._driver_lock = threading.Lock()
        self._driver_retry_at = 0.0
        self._driver_backoff = Backoff(0.25, 5.0)
        self._mux_lock = threading.Lock()
        self._mux_error: str | None = None  # why the multiplexer is unreachable, if it is
        self._mux_retry_at = 0.0
        self._mux_backoff = Backoff(MUX_BACKOFF_MIN, MUX_BACKOFF_MAX)
        self.mux_events_live = False  # the driver's event stream is connected
        self.mux_resyncs = 0  # event streams that lost events and were resubscribed

    @property
    def driver(self):
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

    def mux_ready(self) -> str | None:
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

    def driver_status(self) -> dict:
        drv = self.driver
        error = self._driver_error if drv is None else self._mux_error
        return {
            "name": getattr(drv, "name", None),
            "healthy": drv is not None and self._mux_error is None,
            "error": error,
            "info": self.driver_info if drv is not None else None,  # version, protocol
        }

    def _make_driver(self):
        from orcr_core.pm.drivers import choose_driver

        try:
            factory, _why = choose_driver(self.config, self.registry)
            drv = factory(self.config)
            drv.ensure_session()  # starts orcr's own multiplexer server when none answers
            self.driver_info = drv.handshake()
            return drv, None
        except Exception as exc:  # surfaced in server status; promotion waits
            log.warning("no driver: %s", exc)
            return None, str(exc)

    def reset_driver(self) -> None:
        with self._driver_lock:
            self._driver = None
            self._driver_retry_at = 0.0

    def mux_events_loop(self) -> None:
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
        """
        backoff = Backoff(0.25, 5.0)
        while not self.stopping.is_set():
            drv = self.driver
            stream = getattr(drv, "events", None)
            if stream is None:
                if self.stopping.wait(5.0):
                    return
                continue
            try:
                for ev in stream(stop=self.stopping, on_start=self._mux_events_started):
                    backoff.reset()
                    if ev.get("event") == "pane_exited":
                        pane_id = (ev.get("data") or {}).get("pane_id")
                        if pane_id:
                            self.exited_panes[pane_id] = time.time()
                    self.monitor.pane_changed()
            except DriverError as exc:
                if exc.code == "events_lost":
                    # not an outage: the stream lost events and was closed; subscribe
                    # again at once (the new acknowledgement takes a fresh snapshot)
                    self.mux_resyncs += 1
                    log.info("multiplexer event stream lost events: resync %d", self.mux_resyncs)
                    self.monitor.pane_changed()
                    continue
                log.info("multiplexer event stream ended: %s", exc)
            except Exception as exc:  # the stream broke: reconnect with backoff
                log.info("multiplexer event stream ended: %s", exc)
            if self.mux_events_live:
                self.mux_events_live = False
                self.monitor.events_live_changed()
            if self.stopping.wait(backoff.next()):
                return

    def _mux_events_started(self) -> None:
        """The event stream is connected: from now on pane changes are announced."""
        self.mux_events_live = True
        self.monitor.events_live_changed()
