"""The server's multiplexer is a part (server/multiplexer.py), not a mixin: it is
made from a config, a registry and a stop event alone, and tells the rest of the
server about panes only through the callbacks it is given (issue 34 item 5)."""

from __future__ import annotations

import threading
from pathlib import Path

from orcr_core.config import Config
from orcr_core.contracts import DriverError
from orcr_core.pm.plugins import Registry
from orcr_core.server.multiplexer import Multiplexer


class _Driver:
    """A multiplexer whose server is up or down at the test's word, with an event
    stream that replays ``script`` (events, or a DriverError to raise) once."""

    name = "fake"

    def __init__(self, config: Config) -> None:
        self.up = True
        self.script: list = []

    def ensure_session(self) -> None:
        if not self.up:
            raise DriverError("connection refused", code="unreachable", retryable=True)

    def handshake(self) -> dict:
        return {"version": "1"}

    def events(self, stop=None, on_start=None):
        on_start()
        while self.script:
            step = self.script.pop(0)
            if isinstance(step, Exception):
                raise step
            yield step
        stop.set()  # the script is over: the part's loop ends with the server


def _mux() -> tuple[Multiplexer, threading.Event]:
    made: list[_Driver] = []

    def factory(cfg: Config) -> _Driver:
        made.append(_Driver(cfg))
        return made[-1]

    cfg = Config(data={"driver": {"name": "fake"}}, path=Path("/nonexistent"))
    stopping = threading.Event()
    return Multiplexer(lambda: cfg, Registry(drivers={"fake": factory}), stopping), stopping


def test_ready_says_why_while_the_multiplexer_is_down_and_recovers():
    """Planted: ready() not clearing its error after ensure_session succeeds again
    -> fails (promotion would stay held after the multiplexer came back)."""
    mux, _ = _mux()
    assert mux.ready() is None and mux.status()["healthy"]
    mux.driver.up = False
    why = mux.ready()
    assert why is not None and "fake does not answer" in why and "connection refused" in why
    assert mux.status() == {
        "name": "fake",
        "healthy": False,
        "error": why,
        "info": {"version": "1"},
    }
    mux.driver.up = True
    mux._mux_retry_at = 0.0  # the backoff's wait is over
    assert mux.ready() is None and mux.status()["healthy"]


def test_follow_events_reports_through_its_callbacks_only():
    """Planted: a pane_exited event not passed to ``pane_exited`` -> fails (the
    server would end that agent ``lost`` instead of ``exited``)."""
    mux, _stopping = _mux()
    mux.driver.script = [
        {"event": "pane_exited", "data": {"pane_id": "%3"}},
        DriverError("lost 4 events", code="events_lost"),
        {"event": "pane_created", "data": {"pane_id": "%4"}},
    ]
    seen: list = []
    mux.follow_events(
        changed=lambda: seen.append("changed"),
        live_changed=lambda: seen.append(("live", mux.events_live)),
        pane_exited=lambda pane: seen.append(("exited", pane)),
    )
    assert seen == [
        ("live", True),
        ("exited", "%3"),
        "changed",
        "changed",  # the resync: a fresh snapshot at once
        ("live", True),  # subscribed again
        "changed",
        ("live", False),  # the stream ended
    ]
    assert mux.resyncs == 1
