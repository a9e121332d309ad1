"""No tmux control client outlives the orcr server that started it (issue 33 item 9).

Seven ``tmux -C attach-session`` clients were once found with PPID 1, 20 minutes
after ``orcr server stop``. A control client ends when its stdin reaches EOF, but
tmux handles that EOF in the tmux server (the client hands it its stdin), so a
client ends only once the tmux server reads it; and the server's own cleanup of its
clients (the event stream's ``finally``) ran only if the stream's thread got there
before the process exited: the thread is a daemon, stopped mid-``select`` at exit,
and ``os._exit`` (a damaged store) and SIGKILL run no cleanup at all.

Each control client now starts under a wrapper that sets ``PR_SET_PDEATHSIG``
(orcr_tmux/control.py): the kernel sends it SIGTERM when the server thread that
started it ends, however the server ends. A SIGTERM ends a tmux client even while
its tmux server is stopped, so the tests below stop the tmux server (SIGSTOP)
around the stop or the SIGKILL: the EOF path cannot end a client then, and any
client left is one orcr left.

Planted: ``bound_to_this_thread`` returning argv unchanged (no wrapper) -> both
tests fail (the stop: a client left; the SIGKILL: the clients still run 30 s on).
"""

from __future__ import annotations

import os
import signal
import subprocess

import psutil
import pytest

from orcr_core.kit.testing import until


def _controls(home) -> dict[int, float]:
    """This home's tmux control clients: ``{pid: create_time}``."""
    found = {}
    for p in psutil.process_iter(["pid", "cmdline"]):
        try:
            argv = p.info["cmdline"] or []
            if "-C" in argv and "attach-session" in argv:
                if p.environ().get("ORCR_HOME") == str(home.path):
                    found[p.pid] = p.create_time()
        except psutil.Error:
            continue
    return found


def _alive(procs: dict[int, float]) -> list[int]:
    out = []
    for pid, ctime in procs.items():
        try:
            p = psutil.Process(pid)
            if p.create_time() == ctime and p.status() != psutil.STATUS_ZOMBIE:
                out.append(pid)
        except psutil.Error:
            continue
    return out


def _tmux_server(live) -> psutil.Process:
    argv = ["tmux", "-S", str(live.mux.socket), "display-message", "-p", "#{pid}"]
    return psutil.Process(int(subprocess.run(argv, capture_output=True, text=True).stdout))


def _start_with_agents(live, n: int = 2) -> dict[int, float]:
    live.start_server()
    for i in range(n):
        live.run("agent", "run", "--provider", "echo", "--path", f"c/a{i}", "hi", check=True)
    for i in range(n):
        live.run("agent", "wait", f"c/a{i}", "--timeout", "60s", check=True)
    until(lambda: _controls(live), 30, what="the server's control clients")
    return _controls(live)


@pytest.mark.parametrize("live", ["tmux"], indirect=True)
def test_a_stop_leaves_no_control_client(live):
    """``orcr server stop``: once the server has exited, none of its control clients
    runs, even while the tmux server cannot read their EOF (SIGSTOPped around the
    stop: before the fix every client was left, 3 of 3 runs)."""
    before = _start_with_agents(live)
    tmux = _tmux_server(live)
    tmux.suspend()  # the stdin EOF alone can end no client now
    try:
        r = live.run("server", "stop", timeout=60)
        assert r.returncode == 0, r
        until(lambda: live.proc.poll() is not None, 30, what="the server to exit")
        left = _alive(before)
    finally:
        tmux.resume()
    assert not left, f"control clients left after the stop: {left}"
    assert tmux.is_running()  # the agents' tmux server itself stays (agents live on)


@pytest.mark.parametrize("live", ["tmux"], indirect=True)
def test_a_sigkill_then_a_restart_leaves_no_control_client(live):
    """SIGKILL the server while the tmux server cannot read the clients' EOF: its
    clients end with it (before the fix they stayed, 1 of 1 run); a restarted server
    starts its own, and its stop leaves none at all."""
    before = _start_with_agents(live)
    tmux = _tmux_server(live)
    tmux.suspend()  # the stdin EOF alone can end no client now
    try:
        os.kill(live.proc.pid, signal.SIGKILL)
        live.proc.wait()
        until(lambda: not _alive(before), 30, what="the killed server's clients to end")
    finally:
        tmux.resume()
    live.start_server()
    live.run("agent", "ls", check=True)
    until(lambda: _controls(live), 30, what="the new server's control clients")
    assert not set(_controls(live)) & set(before)
    assert live.run("server", "stop", timeout=60).returncode == 0
    until(lambda: live.proc.poll() is not None, 30, what="the server to exit")
    left = _alive(_controls(live))
    assert not left, f"control clients left after the stop: {left}"
