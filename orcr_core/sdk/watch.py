"""A watch that outlives the server: snapshot, then every later event, across restarts.

``watch.open`` gives a snapshot and streams every later event under a cursor pin
(seed 002). When the connection drops — the server was killed, upgraded or
restarted — a :class:`Watcher` reconnects with backoff (autostarting a server as
any verb does, when its client may), and resumes with ``events.subscribe`` from
the last seq it handed out: the event log is durable, so nothing is missed, and
seqs at or below the cursor are dropped, so nothing is applied twice. When that
cursor has fallen out of retention meanwhile (``cursor_expired``) it takes a new
snapshot and hands it out as a ``watch.snapshot`` pseudo-event, which replaces
whatever the consumer built so far.

:class:`EventTail` is the same resume for the event log alone (``orcr events --follow``).

Import-light: ``orcr agent wait`` and ``orcr events`` ride it on the CLI's client path.
"""

from __future__ import annotations

import time

from orcr_core.common.backoff import Backoff
from orcr_core.sdk.client import Client, ServerError

TYPE_CHECKING = False  # typing costs milliseconds at every CLI start
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path
    from typing import Any

#: Error codes that mean "the server went away", worth reconnecting for.
GONE = ("connection_closed", "server_not_running", "server_start_failed")
RESNAPSHOT = "watch.snapshot"
NOT_ANSWERING = "server_not_answering"


def reconnecting(
    attempt: Callable[[], Any],
    outage: Callable[[Exception], bool],
    reconnect_for: float,
    deadline: float | None = None,
) -> Any:
    """``attempt()`` until it returns, while the server is away: what :class:`Watcher`
    and :class:`EventTail` share.

    A ``ServerError`` or ``OSError`` that ``outage`` calls an outage is retried after
    a backoff of 0.05 s doubling to 2 s, for up to ``reconnect_for`` seconds (then
    it is raised); any other is raised at once. None when the monotonic
    ``deadline`` passes first (the caller tries again on its next call)."""
    backoff = Backoff(0.05, 2.0, give_up_after=reconnect_for)
    while True:
        try:
            return attempt()
        except (ServerError, OSError) as exc:
            if not outage(exc) or backoff.expired():
                raise
        delay = backoff.next()
        if deadline is not None:
            now = time.monotonic()
            if now >= deadline:
                return None
            delay = min(delay, deadline - now)
        time.sleep(delay)


class Watcher:
    """Snapshot plus events; see the module docstring. Not thread-safe."""

    def __init__(
        self,
        path: Path | str,
        autostart: bool = True,
        target: str | None = None,
        reconnect_for: float = 60.0,
        on_reconnect: Callable[[Exception], None] | None = None,
    ):
        self.path = path
        self.autostart = autostart
        self.target = target
        self.reconnect_for = reconnect_for
        self.on_reconnect = on_reconnect
        self.conn: Client | None = None
        self.cursor = 0
        self.only: set[str] | None = None
        self.snapshot = self._first_open()

    def _first_open(self) -> dict:
        """The first snapshot, retried like a reconnect if the server goes away mid-handshake."""
        dropped = False

        def outage(exc: Exception) -> bool:
            nonlocal dropped
            code = exc.code if isinstance(exc, ServerError) else "connection_closed"
            if code not in GONE or (code != "connection_closed" and not dropped):
                return False  # no server to begin with is an answer, not an outage
            dropped = True
            return True

        return reconnecting(self._open, outage, self.reconnect_for)

    def _open(self) -> dict:
        """``watch.open`` on a fresh connection: the snapshot, and the cursor at it."""
        self.close()
        c = Client(self.path, self.autostart).connect()
        try:
            snap = c.call("watch.open", **({"target": self.target} if self.target else {}))
        except BaseException:
            c.close()
            raise
        self.conn = c
        self.cursor = snap["snapshot_seq"]
        # a targeted watch follows the agents its snapshot named, as watch.open does
        self.only = {a["uuid"] for a in snap["agents"]} if self.target else None
        return snap

    def _resubscribe(self, deadline: float | None) -> dict | None:
        """Reconnect and resume from the cursor; a re-snapshot pseudo-event if it expired.

        Returns None once resumed, or when ``deadline`` passed first (the next
        call tries again).
        """
        self.close()

        def attempt() -> dict | None:
            c = Client(self.path, self.autostart).connect()
            try:
                c.call("events.subscribe", since_seq=self.cursor)
            except ServerError as exc:
                c.close()
                if exc.cause != "cursor_expired":
                    raise
                snap = self.snapshot = self._open()
                return {"seq": self.cursor, "kind": RESNAPSHOT, "agent": None, "data": snap}
            self.conn = c
            return None

        # a server that does not answer a hello (5 s) is an outage here too: a long
        # wait keeps its own bound (reconnect_for), not the handshake's
        def outage(exc: Exception) -> bool:
            return not isinstance(exc, ServerError) or exc.code in (*GONE, NOT_ANSWERING)

        return reconnecting(attempt, outage, self.reconnect_for, deadline)

    def next(self, timeout: float | None = None) -> dict | None:
        """The next event (or ``watch.snapshot``), or None after ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            if self.conn is None:
                pseudo = self._resubscribe(deadline)
                if pseudo is not None:
                    return pseudo
                if self.conn is None:
                    return None  # still reconnecting when the caller's time ran out
                continue
            try:
                self.conn.settimeout(left if left is None or left > 0 else 0.001)
                msg = self.conn.recv()
            except TimeoutError:
                return None
            except (ServerError, OSError) as exc:
                if isinstance(exc, ServerError) and exc.code not in GONE:
                    raise
                if self.on_reconnect:
                    self.on_reconnect(exc)
                self.close()
                continue
            if "error" in msg:
                e = msg["error"]
                if e.get("cause") == "cursor_expired":
                    snap = self.snapshot = self._open()
                    return {"seq": self.cursor, "kind": RESNAPSHOT, "agent": None, "data": snap}
                raise ServerError(e.get("code", "error"), e.get("message", ""), e.get("cause"))
            ev = msg.get("event")
            if not ev or ev["seq"] <= self.cursor:
                continue  # a reply, or an event this watcher already handed out
            self.cursor = ev["seq"]
            if self.only is None or ev["agent"] in self.only:
                return ev

    def __iter__(self) -> Iterator[dict]:
        while True:
            ev = self.next()
            if ev is not None:
                yield ev

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


class EventTail:
    """The event log from a cursor, across server restarts: ``orcr events``.

    ``events.subscribe`` with ``clamp`` from ``cursor``; when the connection drops
    it reconnects (as :class:`Watcher` does, within ``reconnect_for`` also when the
    server does not answer its hello) and resubscribes from the last seq it
    handed out, dropping any seq at or below it: each event once, none skipped
    that the store still holds. Rows retention deleted before they were read are
    a gap, reported to ``on_gap(first_missing, first_kept)``, not an error.
    """

    def __init__(
        self,
        path: Path | str,
        cursor: int,
        autostart: bool = True,
        reconnect_for: float = 60.0,
        on_gap: Callable[[int, int], None] | None = None,
    ):
        self.path = path
        self.cursor = cursor
        self.autostart = autostart
        self.reconnect_for = reconnect_for
        self.on_gap = on_gap
        self.conn: Client | None = None
        self.last_seq = cursor  # the log's end when this tail (re)subscribed

    def subscribe(self) -> Client:
        """Connect and resume from the cursor, retrying while the server is away;
        the connection (also ``self.conn``)."""
        self.close()

        def attempt() -> Client:
            c = Client(self.path, self.autostart).connect()
            try:
                res = c.call("events.subscribe", since_seq=self.cursor, clamp=True)
            except BaseException:
                c.close()
                raise
            if res["since_seq"] > self.cursor:
                if self.on_gap:
                    self.on_gap(self.cursor + 1, res["since_seq"] + 1)
                self.cursor = res["since_seq"]
            self.conn, self.last_seq = c, res["last_seq"]
            return c

        # a server that does not answer a hello (5 s) is an outage too, as in
        # Watcher._resubscribe: `--follow` keeps its own bound (reconnect_for)
        def outage(exc: Exception) -> bool:
            return not isinstance(exc, ServerError) or exc.code in (*GONE, NOT_ANSWERING)

        return reconnecting(attempt, outage, self.reconnect_for)

    def next(self, timeout: float | None = None) -> dict | None:
        """The next event after the cursor, or None after ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            conn = self.conn if self.conn is not None else self.subscribe()
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return None
            try:
                conn.settimeout(left)
                msg = conn.recv()
            except TimeoutError:
                return None
            except (ServerError, OSError) as exc:
                if isinstance(exc, ServerError) and exc.code not in GONE:
                    raise
                self.close()
                continue
            if "error" in msg:
                e = msg["error"]
                if e.get("cause") == "cursor_expired":  # fell behind retention: resume clamped
                    self.close()
                    continue
                raise ServerError(e.get("code", "error"), e.get("message", ""), e.get("cause"))
            ev = msg.get("event")
            if not ev or ev["seq"] <= self.cursor:
                continue  # a reply, or an event already handed out
            self.cursor = ev["seq"]
            return ev

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None
