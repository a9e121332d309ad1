"""Two orcr instances (two ORCR_HOMEs) on one explicitly shared multiplexer server,
running the same paths, with crashes in between: neither ever touches, adopts or
counts the other's panes (issue 8, item 2). Every cleanup path is walked: the late
pane of an ended agent, the orphan of a crashed start, a vanished pane re-matched.

Runs on real tmux and on the herdr emulator (``live`` fixture).
"""

from __future__ import annotations

import signal
import subprocess

from orcr_core.kit.testing import until

FAST = '[timings]\npoll_every = "50ms"\nreconcile_every = "100ms"\n'


def _idle(home, *paths) -> None:
    for path in paths:
        home.run("agent", "wait", path, "--timeout", "30s", check=True)


def _close_from_outside(home, pane_id: str) -> None:
    mux = home.mux
    if mux.kind == "tmux":
        subprocess.run(["tmux", "-S", str(mux.socket), "kill-pane", "-t", pane_id], check=True)
    else:
        from orcr_herdr.client import HerdrClient

        HerdrClient(str(mux.socket)).request("pane.close", {"pane_id": pane_id})


def _crash_start(home, path) -> None:
    """Start ``path`` with the server SIGKILLed right after the pane is made,
    before it is recorded; then restart, so recovery handles the orphan."""
    home.start_server(extra_env={"ORCR_FAULT": "after_start"})
    home.run("agent", "run", "-p", "echo", "--path", path, "hello")  # may lose the reply
    assert home.proc.wait(30) == -signal.SIGKILL, home.server_log()
    home.start_server()


def test_two_instances_on_one_server_never_touch_each_others_panes(live, twin):
    a, b = live, twin
    a.config(a.mux.config() + FAST)
    b.config(b.mux.config() + FAST)
    b.start_server()
    mine_b = ("p/x", "p/y", "p/z")
    for path in mine_b:
        b.run("agent", "run", "-p", "echo", "--path", path, f"b {path}", check=True)
    _idle(b, *mine_b)

    # A crashes mid-start on the same path as a live agent of B: A's recovery closes
    # its own orphan pane (found by its marks), never B's pane of the same label
    _crash_start(a, "p/x")
    row = a.ended("p/x")
    assert (row["exit_reason"], "mid-start" in row["error"]) == ("failed", True), row
    until(lambda: a.mux.labels().count("p/x") == 1, what="A's orphan pane to close")

    # late pane: A's p/y ends killed; B's p/y (same label) is not A's late pane
    a.run("agent", "run", "-p", "echo", "--path", "p/y", "a p/y", check=True)
    _idle(a, "p/y")
    a.run("agent", "kill", "p/y", check=True)
    until(lambda: a.mux.labels().count("p/y") == 1, what="A's p/y pane to close")

    # a vanished pane is never re-matched to another instance's pane of that label
    a.run("agent", "run", "-p", "echo", "--path", "p/z", "a p/z", check=True)
    _idle(a, "p/z")
    _close_from_outside(a, a.get("p/z")["pane_id"])
    assert a.ended("p/z")["exit_reason"] == "lost"

    # and the other way round: B crashes mid-start on a path A runs
    a.run("agent", "run", "-p", "echo", "--path", "p/v", "a p/v", check=True)
    _idle(a, "p/v")
    b.kill_server()
    _crash_start(b, "p/v")
    assert b.ended("p/v")["exit_reason"] == "failed"

    # several reconcile passes of both: nothing of the other's is touched or counted
    for home in (a, b):
        home.stop_server()
        home.start_server()
    for home, live_paths in ((a, ["p/v"]), (b, list(mine_b))):
        st = home.status()
        assert st["drift"]["orphan_agent_panes"] == 0, st["drift"]
        for path in live_paths:
            assert home.get(path)["status"] == "idle"
            home.run("agent", "send", path, "again", check=True)
        _idle(home, *live_paths)
        for path in live_paths:
            assert home.run("agent", "read", path, check=True).stdout == "again\n"
    assert a.mux.labels() == sorted(["p/v", *mine_b])
