"""orcr top's stream: one watch.open, every event once, reconnect + re-snapshot after a restart."""

from __future__ import annotations

import threading

from orcr_core.kit.testing import until
from orcr_core.top.model import FleetModel, Gap
from orcr_core.top.source import WatchSource


class Recorder:
    """A sink that applies into a model as the app does, and keeps what it saw."""

    def __init__(self):
        self.model = FleetModel()
        self.lock = threading.Lock()
        self.snapshots = 0
        self.downs: list[str] = []
        self.seqs: list[int] = []
        self.gaps = 0

    def on_snapshot(self, snap):
        with self.lock:
            self.snapshots += 1
            self.model.load_snapshot(snap)

    def on_events(self, events):
        with self.lock:
            self.seqs += [e["seq"] for e in events]
            try:
                self.model.apply_batch(events)
            except Gap:
                self.gaps += 1

    def on_down(self, reason):
        with self.lock:
            self.downs.append(reason)

    def statuses(self):
        with self.lock:
            return {r.path: r.status for r in self.model.rows.values()}


def test_stream_follows_agents_and_survives_a_server_restart(server):
    rec = Recorder()
    src = WatchSource(server.socket, rec).start()
    try:
        until(lambda: rec.snapshots == 1, what="the first snapshot")
        with server.sdk() as o:
            o.run("x", provider="testp", path="s/a", cwd="/")
            o.run("x", provider="testp", path="s/b", cwd="/")
            until(lambda: rec.statuses() == {"s/a": "working", "s/b": "working"}, what="working")
            o.kill("s/a")
        until(lambda: rec.statuses()["s/a"] == "ended", what="s/a ended")
        assert rec.seqs == list(range(rec.seqs[0], rec.seqs[0] + len(rec.seqs)))
        assert rec.model.duplicates == 0 and rec.gaps == 0

        server.kill_server()
        until(lambda: rec.downs, what="the stream to notice the server is gone")
        server.start_server()
        with server.sdk() as o:  # changes made while top was away arrive in the new snapshot
            o.kill("s/b")
            o.run("x", provider="testp", path="s/c", cwd="/")
        until(lambda: rec.snapshots >= 2, what="a re-snapshot")
        until(
            lambda: rec.statuses().get("s/c") == "working" and rec.statuses()["s/b"] == "ended",
            what="the new server's state",
        )
        assert rec.statuses()["s/a"] == "ended"  # kept from before the restart
    finally:
        src.stop()
