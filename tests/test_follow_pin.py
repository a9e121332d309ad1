"""``events.subscribe`` pins its cursor (issue 38 part 3): retention never deletes an
event a connected follower has not been sent, however slowly it reads."""

from __future__ import annotations

import socket
import threading
from types import SimpleNamespace

from orcr_core.kit.testing import until


class _StalledPeer:
    """A follower whose socket is full: ``send`` blocks at the third frame until
    ``resume`` is set, as a real one blocks while the client reads nothing (the
    handler's thread waits in ``sendall``, holding the events it read)."""

    def __init__(self) -> None:
        self.sock, self.other = socket.socketpair()
        self.frames: list[dict] = []
        self.stalled = threading.Event()
        self.resume = threading.Event()

    def send(self, obj: dict) -> None:
        self.frames.append(obj)
        if len(self.frames) == 3:
            self.stalled.set()
            self.resume.wait(30)


def test_a_stalled_follower_loses_nothing_to_retention(tmp_path):
    """A follower from seq 0 stalls after two events; 20 more are written and a
    retention pass (keep 5) runs: it still receives 1..40, each once, in order, with
    no cursor_expired frame. Once it has read them its pin moves on, so retention
    deletes again, and the pin goes with the connection.
    Planted: events.subscribe streaming unpinned (the pin dropped) -> retention
    deletes 1..35 under it, the stream ends cursor_expired -> fails."""
    from orcr_core.server.stream_handlers import events_subscribe
    from orcr_core.store import events
    from orcr_core.store.db import close_store, open_store
    from orcr_core.store.models import db

    open_store(tmp_path / "store.db")
    peer = _StalledPeer()
    server = SimpleNamespace(bus=events.Bus(), stopping=threading.Event())
    try:
        with db.atomic("IMMEDIATE"):
            for _ in range(20):
                events.emit("test.event")
        t = threading.Thread(target=events_subscribe, args=(server, peer, 7, {"since_seq": 0}))
        t.start()
        assert peer.stalled.wait(10)
        with db.atomic("IMMEDIATE"):
            for _ in range(20):
                events.emit("test.event")
        events.apply_retention(server.bus, keep=5)  # a pass while the follower is stalled
        peer.resume.set()
        until(
            lambda: any("error" in f or f.get("event", {}).get("seq") == 40 for f in peer.frames),
            10,
            "the follower to receive seq 40",
        )
        assert [f for f in peer.frames if "error" in f] == []
        assert [f["event"]["seq"] for f in peer.frames if "event" in f] == list(range(1, 41))
        until(lambda: server.bus.oldest_pin() == 40, 10, "the pin to follow the cursor")
        assert events.apply_retention(server.bus, keep=5) == 35  # what it has read goes
        peer.other.close()  # the follower hangs up: the handler returns and unpins
        server.bus.notify()
        t.join(10)
        assert not t.is_alive() and server.bus.oldest_pin() is None
    finally:
        peer.resume.set()
        server.stopping.set()
        server.bus.notify()
        peer.sock.close()
        close_store()


def test_a_pin_that_lets_go_with_no_write_after_it_gets_a_retention_pass(tmp_path):
    """The monitor's retention runs after a write, and also once the oldest pin has
    moved: a pin behind at the last write (the notifier's, a follower's) lets go with
    no write after it, and its rows go at the next step, not at some later write.
    Planted: the pin left out of RetentionPasses' key -> the pass after the move
    deletes nothing -> fails."""
    from orcr_core.store import events
    from orcr_core.store.db import close_store, open_store
    from orcr_core.store.models import db

    open_store(tmp_path / "store.db")
    bus, passes = events.Bus(), events.RetentionPasses()
    try:
        with db.atomic("IMMEDIATE"):
            for _ in range(20):
                events.emit("test.event")
        pin = bus.pin(3)
        writes = db.write_transactions
        assert passes.after_step(bus, writes, keep=5, keep_per_loop=None) == 3  # held at 3
        assert passes.after_step(bus, writes, keep=5, keep_per_loop=None) == 0  # no change
        bus.move_pin(pin, 20)  # the holder read on; nothing was written since
        assert passes.after_step(bus, writes, keep=5, keep_per_loop=None) == 12
        assert [r[0] for r in db.execute_sql("SELECT seq FROM event ORDER BY seq")] == list(
            range(16, 21)
        )
    finally:
        close_store()
