"""The connections ``orcr top`` holds: one ``watch.open`` stream (on a thread,
reconnecting and re-snapshotting after a server restart) and one for requests."""

from __future__ import annotations

import select
import threading
import time
from pathlib import Path
from typing import Protocol

from orcr_core.common.backoff import Backoff
from orcr_core.sdk.client import Client, ServerError
from orcr_core.top.model import FleetModel

#: how long the reader keeps gathering events that are already there into one batch
BATCH_WINDOW = 0.03
BATCH_MAX = 2000
BACKOFF_MAX = 2.0


class Sink(Protocol):
    def on_snapshot(self, snap: dict) -> None: ...
    def on_events(self, events: list[dict]) -> None: ...
    def on_down(self, reason: str) -> None: ...


class WatchSource:
    """Reads one ``watch.open`` stream on a daemon thread and hands the snapshot,
    then batches of events, to ``sink`` (from that thread). When the connection
    drops it calls ``on_down`` and retries with backoff; every new connection
    starts with a fresh snapshot. It never starts a server."""

    def __init__(self, socket_path: Path, sink: Sink):
        self.path = socket_path
        self.sink = sink
        self._stop = threading.Event()
        self._client: Client | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def start(self) -> WatchSource:
        self._thread = threading.Thread(target=self._run, name="orcr-top-watch", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self.resnapshot()
        if self._thread is not None:
            self._thread.join(2)

    def resnapshot(self) -> None:
        """Drop the stream; the reader reconnects and takes a new snapshot."""
        with self._lock:
            c = self._client
        if c is not None and c.sock is not None:
            try:
                c.sock.shutdown(2)
            except OSError:
                pass

    def _run(self) -> None:
        backoff = Backoff(0.05, BACKOFF_MAX)
        while not self._stop.is_set():
            c = Client(self.path, autostart=False)
            try:
                c.connect()
                with self._lock:
                    self._client = c
                snap = c.call("watch.open", all=False)
                self.sink.on_snapshot(snap)
                backoff.reset()
                c.sock.settimeout(0.5)
                while not self._stop.is_set():
                    batch = self._read_batch(c)
                    if batch:
                        self.sink.on_events(batch)
            except (ServerError, OSError, ValueError) as exc:
                if self._stop.is_set():
                    break
                self.sink.on_down(getattr(exc, "message", None) or str(exc) or type(exc).__name__)
                self._stop.wait(backoff.next())
            finally:
                with self._lock:
                    self._client = None
                c.close()

    @staticmethod
    def _read_batch(c: Client) -> list[dict]:
        try:
            msg = c.recv()
        except TimeoutError:
            return []
        events: list[dict] = []
        deadline = time.monotonic() + BATCH_WINDOW
        while True:
            if "error" in msg:
                e = msg["error"]
                raise ServerError(e.get("code", "error"), e.get("message", ""), e.get("cause"))
            if "event" in msg:
                events.append(msg["event"])
            if len(events) >= BATCH_MAX or time.monotonic() >= deadline:
                return events
            if c.reader.peek_line() is None:
                ready, _, _ = select.select([c.sock], [], [], 0.002)
                if not ready:
                    return events
            try:
                msg = c.recv()
            except TimeoutError:
                return events


class Requests:
    """The request connection (kill, send, read, attach, status): thread-safe,
    reconnects once on a dropped connection, never starts a server."""

    def __init__(self, socket_path: Path):
        self.client = Client(socket_path, autostart=False)
        self._lock = threading.Lock()

    def call(self, method: str, **params):
        with self._lock:
            try:
                return self.client.call(method, **params)
            except (ServerError, OSError) as exc:
                if isinstance(exc, ServerError) and exc.code not in (
                    "connection_closed",
                    "server_not_running",
                ):
                    raise
                self.client.close()
                return self.client.call(method, **params)

    def answer(self, uuid: str) -> str | None:
        try:
            return self.call("agent.read", target=uuid, screen=False).get("text")
        except ServerError:
            return None

    def close(self) -> None:
        self.client.close()


def load_once(socket_path: Path, all: bool = False, answers: bool = True) -> FleetModel:
    """One frame's model, for ``orcr top --once``: a snapshot, the server's status,
    the loops, the last answer of every agent that has one, and the activities
    (a lander) running on this machine."""
    from orcr_core.kit.activities import read_activities

    model = FleetModel()
    model.set_activities(read_activities())
    with Client(socket_path, autostart=False) as c:
        model.load_snapshot(c.call("watch.open", all=all))
    req = Requests(socket_path)
    try:
        model.set_status(req.call("server.status"))
        model.set_loops(req.call("loop.list")["loops"])
        if answers:
            for uuid in model.stale_answers():
                model.set_answer(uuid, req.answer(uuid))
    finally:
        req.close()
    return model
