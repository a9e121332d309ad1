"""The stalled flag (issue 10, item 10): a working agent whose transcript has
not grown for ``timings.stall_after`` is flagged (``agent.stalled``, ``stalled: true``)
in ``agent ls``/``get`` and ``server status``; growth clears it (``stalled: false``).
A flag, not a status: the agent stays ``working``.

On real tmux with the echo agent, whose ``[sleep N]`` turn writes nothing for N
seconds. ``poll_every`` and ``reconcile_every`` are an hour, so only the stall
timer (armed at the last growth + stall_after) can explain a flag. This is the one
end-to-end test of the flag (through a crash, on tmux: the flag reads the transcript,
not the multiplexer); the timer's rules (growth moves it, a kill clears the flag,
``stall_after = 0`` arms none) are tested on a fake clock in the test process,
``tests/test_timers_clock.py``, without waiting minutes of silence out.
"""

from __future__ import annotations

import json

import pytest

from orcr_core.kit.testing import until

NO_POLLING = '[timings]\npoll_every = "1h"\nreconcile_every = "1h"\n'


def _stalled_events(home, uuid: str) -> list[dict]:
    return [e["data"] for e in home.events(uuid) if e["kind"] == "agent.stalled"]


def _flags(home, uuid: str) -> list[bool]:
    """The ``stalled`` value of each ``agent.stalled`` event, in order."""
    return [d["stalled"] for d in _stalled_events(home, uuid)]


def _grow(agent: dict) -> None:
    """Append a line the echo reader skips: the transcript grows, no turn changes."""
    with open(agent["agent_session"]["value"], "a") as f:
        f.write(json.dumps({"type": "note", "text": "still at it"}) + "\n")


@pytest.mark.parametrize("live", ["tmux"], indirect=True)
def test_a_silent_working_agent_is_flagged_survives_a_crash_and_growth_clears_it(live):
    live.config(live.mux.config() + NO_POLLING + 'stall_after = "1s"\n')
    live.start_server()
    live.run("agent", "run", "-p", "echo", "--path", "s/slow", "[sleep 40] done", check=True)
    a = until(lambda: (lambda a: a if a["stalled"] else None)(live.get("s/slow")), 30,
              what="the stalled flag")  # fmt: skip
    assert a["status"] == "working" and a["stalled_at"]
    (flagged,) = _stalled_events(live, a["uuid"])
    assert flagged["stalled"] is True and flagged["silent_for"] >= 1.0
    ls = live.run("agent", "ls", check=True).stdout
    assert "working (stalled)" in ls
    status = live.status()
    assert status["stalled"] == 1
    assert "stalled 1 working agents" in live.run("server", "status", check=True).stdout

    # a crash while stalled: the flag and its clock persist, and the restarted
    # monitor (which re-reads and re-watches the transcript) raises no second event
    live.kill_server()
    live.start_server()
    until(lambda: live.status()["monitor"]["transcripts_notified"] == 1, 30, what="re-watched")
    assert live.get("s/slow")["stalled"]
    assert _flags(live, a["uuid"]) == [True]

    # the transcript grows mid-turn: the flag clears (the agent still working), and
    # one stall_after of silence later it is flagged again (events are the record:
    # the live flag may already be up again when a loaded machine looks)
    _grow(a)
    until(lambda: _flags(live, a["uuid"])[:2] == [True, False], 30, what="the flag cleared")
    cleared = _stalled_events(live, a["uuid"])[1]
    assert cleared["stalled_for"] > 0
    until(lambda: _flags(live, a["uuid"]) == [True, False, True], 30, what="flagged again")
    again = live.get("s/slow")
    assert (again["status"], again["stalled"]) == ("working", True)
    assert again["stalled_at"] != a["stalled_at"]

    # the turn ends: that growth clears it before the agent goes idle
    live.run("agent", "wait", "s/slow", "--timeout", "60s", check=True)
    after = live.get("s/slow")
    assert (after["status"], after["stalled"], after["stalled_at"]) == ("idle", False, None)
    kinds = [
        (e["kind"], e["data"].get("stalled", e["data"].get("to")))
        for e in live.events(a["uuid"])
        if e["kind"] in ("agent.stalled", "agent.status")
    ]
    assert kinds[-2:] == [("agent.stalled", False), ("agent.status", "idle")]
    assert _flags(live, a["uuid"]) == [True, False, True, False]
    assert live.status()["stalled"] == 0
    assert "(stalled)" not in live.run("agent", "ls", check=True).stdout


def test_stall_after_is_a_duration_in_its_range(orcr_home):
    for value in ("90s", "0"):
        ok = orcr_home.run("config", "set", "timings.stall_after", value)
        assert ok.returncode == 0, ok.stderr
    bad = orcr_home.run("config", "set", "timings.stall_after", "40d")
    assert bad.returncode != 0
    assert (
        "timings.stall_after" in bad.stderr and "0 (off) or a duration from 1s to 30d" in bad.stderr
    )
