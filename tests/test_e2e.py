"""The whole path on a real multiplexer with a real agent: echo on tmux and herdr."""

from __future__ import annotations

import json

import pytest

from orcr_core.kit.testing import until as _until  # noqa: E402


@pytest.mark.herdr_08
def test_quick_start_lifecycle(live):
    """The README's quick start, then a second turn and a kill."""
    live.start_server()
    r = live.run("agent", "run", "--provider", "echo", "--path", "demo/hello", "hello", check=True)
    assert r.stdout.split()[0] == "demo/hello"
    assert live.run(
        "agent", "wait", "demo/hello", "--timeout", "30s", check=True
    ).stdout.strip() == ("demo/hello idle")
    assert live.run("agent", "read", "demo/hello", check=True).stdout == "hello\n"
    assert live.mux.labels() == ["demo/hello"]

    r = live.run("agent", "send", "demo/hello", "[sleep 3] second turn", check=True)
    assert "working turn 2" in r.stdout
    live.run("agent", "wait", "demo/hello", "--timeout", "30s", check=True)
    assert live.run("agent", "read", "demo/hello", check=True).stdout == "second turn\n"

    # a turn that outlasts the test: a send meanwhile is refused, whatever the load
    r = live.run("agent", "send", "demo/hello", "[sleep 600] third turn", check=True)
    assert "working turn 3" in r.stdout
    r = live.run("agent", "send", "demo/hello", "too soon")
    assert r.returncode == 1 and "not_idle" in r.stderr

    live.run("agent", "kill", "demo/hello", check=True)
    a = live.get("demo/hello")
    assert (a["status"], a["exit_reason"]) == ("ended", "killed")
    _until(lambda: live.mux.labels() == [], what="the pane to close")


def test_errored_turn_says_so_in_wait_and_read(live):
    """After ``[fail] boom`` the agent is idle, but wait and read say the turn
    errored, with the error, and exit 7."""
    live.start_server()
    live.run("agent", "run", "--provider", "echo", "--path", "f/x", "[fail] boom", check=True)
    # the first wait sees the turn end happen; the second finds the agent idle already
    for _ in range(2):
        r = live.run("agent", "wait", "f/x", "--timeout", "30s")
        assert r.returncode == 7, (r.stdout, r.stderr)
        assert r.stdout.strip() == "f/x idle (turn 1 errored)"
        assert "turn 1 errored: boom" in r.stderr
    r = live.run("agent", "wait", "f/x", "--timeout", "30s", "--json")
    a = json.loads(r.stdout)
    assert r.returncode == 7 and (a["turn_status"], a["turn_error"]) == ("errored", "boom")
    r = live.run("agent", "read", "f/x")
    assert r.returncode == 7 and r.stdout == "" and "turn 1 errored: boom" in r.stderr
    r = live.run("agent", "read", "f/x", "--json")
    assert r.returncode == 7
    out = json.loads(r.stdout)
    assert (out["text"], out["turn_status"], out["error"]) == (None, "errored", "boom")
    a = live.get("f/x")
    assert (a["turn_status"], a["turn_error"]) == ("errored", "boom")
    # the next turn that completes clears it
    live.run("agent", "send", "f/x", "fine now", check=True)
    r = live.run("agent", "wait", "f/x", "--timeout", "30s", "--json", check=True)
    assert json.loads(r.stdout)["turn_status"] == "completed"
    assert live.run("agent", "read", "f/x", check=True).stdout == "fine now\n"


def test_read_while_a_turn_runs_says_so_unless_last(live):
    live.start_server()
    live.run("agent", "run", "--provider", "echo", "--path", "r/x", "first", check=True)
    live.run("agent", "wait", "r/x", "--timeout", "30s", check=True)
    live.run("agent", "send", "r/x", "[sleep 60] second", check=True)
    r = live.run("agent", "read", "r/x")
    assert r.returncode == 8 and r.stdout == "", (r.stdout, r.stderr)
    assert "still running" in r.stderr and "--last" in r.stderr and "[turn_running]" in r.stderr
    assert live.run("agent", "read", "r/x", "--last", check=True).stdout == "first\n"
    r = json.loads(live.run("agent", "read", "r/x", "--last", "--json", check=True).stdout)
    assert (r["status"], r["text"], r["turn_status"]) == ("working", "first", "completed")


@pytest.mark.herdr_08
def test_agent_that_exits_by_itself(live):
    live.start_server()
    live.run("agent", "run", "--provider", "echo", "--path", "x/bye", "[exit] bye", check=True)
    r = live.run("agent", "wait", "x/bye", "--until", "ended", "--timeout", "30s", "--json")
    a = live.get("x/bye")
    # tmux keeps the dead pane; herdr removes it and says pane_exited on its event stream
    assert a["exit_reason"] == "exited", (a, r.stderr)
    # exiting by itself is not a bad ending: wait says so and exits 0
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["exit_reason"] == "exited"
    _until(lambda: live.mux.labels() == [], what="the pane to go")
