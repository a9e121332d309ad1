"""tmux's own pane events through control-mode clients, on a real tmux server."""

from __future__ import annotations

import threading

import pytest
from orcr_tmux import control

from orcr_core.contracts import DriverError


class Listener:
    def __init__(self, driver):
        self.seen: list[dict] = []
        self.started = threading.Event()
        self.stop = threading.Event()
        self.ended = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(driver,), daemon=True)
        self.thread.start()

    def _run(self, driver):
        try:
            for ev in driver.events(stop=self.stop, on_start=self.started.set):
                self.seen.append(ev)
        finally:
            self.ended.set()

    def close(self):
        self.stop.set()
        self.thread.join(5)


def test_no_session_yet_is_a_retryable_error(driver):
    with pytest.raises(DriverError) as exc:
        next(iter(driver.events()))
    assert exc.value.retryable


def test_a_pane_killed_outside_orcr_is_announced(h, driver, sandbox, socket_path):
    keep = h.start(["sleep", "600"], label="alpha/keep")
    other = h.start(["sleep", "600"], label="beta/gone")  # another session
    listener = Listener(driver)
    try:
        h.wait_for(listener.started.is_set, what="the control clients to attach")
        sandbox.tmux(["-S", socket_path], "kill-pane", "-t", other.pane_id)
        h.wait_for(
            lambda: (
                {"event": "window_closed", "data": {"window_id": other.tab_id}} in listener.seen
            ),
            what="the window-close notification",
        )
        assert keep.pane_id in h.pane_ids()
    finally:
        listener.close()


def test_an_agent_that_exits_is_announced(h, driver):
    ref = h.start_script("import sys, time; time.sleep(1.5); sys.exit(3)", label="alpha/bye")
    listener = Listener(driver)
    try:
        h.wait_for(listener.started.is_set, what="the control clients to attach")
        h.wait_for(
            lambda: {"event": "pane_exited", "data": {"pane_id": ref.pane_id}} in listener.seen,
            timeout=10,
            what="the pane_dead subscription to fire",
        )
        assert [p.dead for p in driver.snapshot() if p.pane_id == ref.pane_id] == [True]
    finally:
        listener.close()


def test_a_new_session_or_a_dead_server_ends_the_stream(h, driver, sandbox, socket_path):
    h.start(["sleep", "600"], label="alpha/one")
    listener = Listener(driver)
    try:
        h.wait_for(listener.started.is_set, what="the control clients to attach")
        h.start(["sleep", "600"], label="gamma/one")  # a new workspace session
        h.wait_for(listener.ended.is_set, what="the stream to end for a rebuild")
        assert listener.seen[-1]["event"] == "sessions_changed"
        again = Listener(driver)
        h.wait_for(again.started.is_set, what="a second stream over both sessions")
        sandbox.tmux(["-S", socket_path], "kill-server")
        h.wait_for(again.ended.is_set, what="the stream to end with the server")
        again.close()
    finally:
        listener.close()


def test_parse_ignores_what_says_nothing_about_panes():
    assert control.parse("%output %1 hello") is None
    assert control.parse("%begin 1 2 0") is None
    assert control.parse("%subscription-changed orcr-dead $0 @1 1 %4 : 0") is None
    assert control.parse("%subscription-changed other $0 @1 1 %4 : 1") is None
    assert control.parse("%subscription-changed orcr-dead $0 @1 1 %4 : 1") == {
        "event": "pane_exited",
        "data": {"pane_id": "%4"},
    }


class _Stdin:
    def __init__(self):
        self.sent = b""

    def write(self, data: bytes) -> None:
        self.sent += data

    def flush(self) -> None:
        pass


class _Proc:
    def __init__(self):
        self.stdin = _Stdin()


def test_the_subscription_waits_for_the_attach_and_for_tmux_to_accept_it():
    """Sent before the attach, tmux may run `refresh-client -B` first and answer `no
    current client` (seen on tmux 3.3a): that client never heard a pane die. The lines
    are the ones tmux wrote then."""
    proc = _Proc()
    client = control._Client(proc)
    for line in ("%begin 1796072763 281 0", "%end 1796072763 281 0"):  # attach's own block
        assert client.step(line) is False
    assert proc.stdin.sent == b""  # nothing sent before tmux says the client is attached
    assert client.step("%session-changed $0 orcr-ext") is False
    assert proc.stdin.sent.decode() == control._SUBSCRIBE
    assert client.step("%begin 1796072763 282 1") is False
    assert client.step("%end 1796072763 282 1") is True  # live: tmux accepted it
    assert client.step("%end 1796072763 283 1") is False  # only once


def test_a_refused_subscription_makes_the_stream_reconnect():
    client = control._Client(_Proc())
    client.step("%session-changed $0 orcr-ext")
    client.step("%begin 1796072763 280 1")
    client.step("no current client")
    with pytest.raises(DriverError) as exc:
        client.step("%error 1796072763 280 1")
    assert exc.value.retryable
