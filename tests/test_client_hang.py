"""A client never hangs (issue 38 part 6).

With the server SIGSTOPped, or a socket that accepts and never answers, ``orcr agent
ls`` and ``server status`` waited 120 s (the reply timeout) before saying anything.
The connect and the hello now give up within ``HELLO_TIMEOUT`` (5 s) with
``server_not_answering``; an ``ORCR_SOCKET`` pointing at nothing names where this
home's server listens instead of telling a healthy server to restart.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time

import pytest

from orcr_core.cli.errors import ExitCode


def _timed(home, *args, env=None):
    t0 = time.monotonic()
    r = home.run(*args, timeout=60, env=env)
    return r, time.monotonic() - t0


@pytest.mark.parametrize("verb", [("agent", "ls"), ("server", "status")])
def test_a_stopped_server_is_reported_within_5s(server, verb):
    """Planted: the hello waits REPLY_TIMEOUT (no HELLO_TIMEOUT) -> the verb runs past
    the 60 s subprocess timeout (TimeoutExpired)."""
    pid = server.proc.pid
    os.kill(pid, signal.SIGSTOP)
    try:
        r, took = _timed(server, *verb)
    finally:
        os.kill(pid, signal.SIGCONT)
    assert r.returncode == ExitCode.NO_SERVER, r.stderr
    assert took < 15, took  # 5 s, plus a loaded machine's interpreter start
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr  # one line, no traceback
    assert "[server_not_answering]" in lines[0]
    assert f"pid {pid}" in lines[0] and "stopped" in lines[0] and "kill -CONT" in lines[0]
    # resumed, it answers again
    assert server.run("server", "status", check=True).returncode == 0


def test_a_socket_that_accepts_and_never_answers(orcr_home, short_tmp):
    """Planted: the hello waits REPLY_TIMEOUT -> TimeoutExpired at 60 s."""
    path = short_tmp / "mute.sock"
    mute = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    mute.bind(str(path))
    mute.listen(8)
    held: list[socket.socket] = []
    done = threading.Event()

    def accept_forever():
        mute.settimeout(0.2)
        while not done.is_set():
            try:
                held.append(mute.accept()[0])  # accepted, never read, never answered
            except TimeoutError:
                continue

    t = threading.Thread(target=accept_forever, daemon=True)
    t.start()
    try:
        r, took = _timed(orcr_home, "agent", "ls", env={"ORCR_SOCKET": str(path)})
    finally:
        done.set()
        t.join(5)
        for c in held:
            c.close()
        mute.close()
    assert r.returncode == ExitCode.NO_SERVER, r.stderr
    assert took < 15, took
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "[server_not_answering]" in lines[0] and str(path) in lines[0]
    assert "within 5s" in lines[0]
    assert held, "the client never connected"


def test_orcr_socket_pointing_at_nothing_names_this_homes_socket(server, short_tmp):
    """Planted: the held-and-listening branch without the ORCR_SOCKET check -> "restart
    it: orcr server stop" for a healthy server."""
    nowhere = short_tmp / "nowhere.sock"
    r, took = _timed(server, "agent", "ls", env={"ORCR_SOCKET": str(nowhere)})
    assert r.returncode == ExitCode.NO_SERVER, r.stderr
    msg = r.stderr.strip()
    assert len(msg.splitlines()) == 1, msg
    assert f"no orcr server listens at {nowhere} (ORCR_SOCKET)" in msg
    assert f"listens at {server.socket}" in msg
    assert "restart" not in msg
    assert took < 15
    # the server is healthy: without the override it answers
    assert server.run("agent", "ls", check=True).returncode == 0


def test_a_follow_reconnecting_to_a_stopped_server_keeps_its_own_bound(server):
    """A stream's reconnect (``wait``, ``--follow``) meets a server that does not answer
    its hello: it keeps trying within its own ``reconnect_for``, not the handshake's
    5 s. Planted: server_not_answering not retried in _resubscribe -> raises at 5 s."""
    from orcr_core.sdk.watch import Watcher

    w = Watcher(server.socket, autostart=False, reconnect_for=60)
    w.close()  # as after a dropped connection
    pid = server.proc.pid
    os.kill(pid, signal.SIGSTOP)
    timer = threading.Timer(8, os.kill, (pid, signal.SIGCONT))
    timer.start()
    try:
        t0 = time.monotonic()
        assert w._resubscribe(None) is None
        assert time.monotonic() - t0 > 7  # it waited through the stop
        assert w.conn is not None
    finally:
        timer.cancel()
        os.kill(pid, signal.SIGCONT)
        w.close()
