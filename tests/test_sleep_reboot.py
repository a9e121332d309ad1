"""Sleep and reboot (issue 10 item 11).

* A frozen server (SIGSTOP, a laptop's lid closed) past several deadlines (idle
  GC, a turn's --timeout, the stuck-start guard, the reconciliation pass) fires
  each of them exactly once when it thaws (SIGCONT): every clock is computed from
  persisted timestamps, and nothing is doubled.
* A reboot stops the server and the multiplexer together (tmux: its server is
  killed; herdr: the emulator stops and comes back, restoring the panes as
  shells): no agent is doubled, every row is explained by its events, and the
  lost agents are resumed, by ``agent resume`` or by ``[recovery] resume_lost``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "plugins"))
import orcr_test_driver as td  # noqa: E402

from orcr_core.kit.testing import until  # noqa: E402


def _events(home, uuid: str, kind: str) -> list[dict]:
    return [e["data"] for e in home.events(uuid) if e["kind"] == kind]


def _ends(home, uuid: str) -> list[str]:
    return [d.get("exit_reason") for d in _events(home, uuid, "agent.status") if d["to"] == "ended"]


def test_a_frozen_server_fires_every_timer_once_when_it_thaws(orcr_home):
    orcr_home.config(
        '[driver]\nname = "test"\n[timings]\npoll_every = "50ms"\nreconcile_every = "500ms"\n'
        'prompt_confirm = "200ms"\ngc_after = "3s"\nmax_starting = "2s"\n'
    )
    # s/stuck's start hangs in the multiplexer call well past the guard
    orcr_home.start_server(
        extra_env={"ORCR_TEST_START_DELAY": "8", "ORCR_TEST_SLOW_LABEL": "s/stuck"}
    )
    with orcr_home.sdk() as o:
        g = o.run("x", provider="testp", path="g/idle", cwd="/")
        t = o.run("x", provider="testp", path="t/turn", cwd="/", timeout=3)
        w = o.run("x", provider="testp", path="w/work", cwd="/")  # no deadline at all
        for path in ("g/idle", "t/turn", "w/work"):
            until(lambda p=path: o.get(p)["status"] == "working", 30, path)
        td.set_status(o.get("g/idle")["pane_id"], "idle")
        until(lambda: o.get("g/idle")["status"] == "idle", 30, "g/idle idle")
        s = o.run("x", provider="testp", path="s/stuck", cwd="/")
        until(lambda: o.get("s/stuck")["status"] == "starting", 30, "s/stuck starting")
        until(lambda: _events(orcr_home, s["uuid"], "pane.start_requested"), 30)
        rows = {a["path"]: a for a in o.list()}
    os.kill(orcr_home.proc.pid, signal.SIGSTOP)
    try:
        # every deadline passes while it is frozen (the idle clock, the turn's
        # timeout, the guard), and reconciliation would have run many times
        deadline = time.time() + 4.0
        # the "multiplexer" changes meanwhile: a user's pane
        td.add_pane("u:1", None, ws="u", tab="u:t")
        until(lambda: time.time() > deadline, 10, "the frozen time to pass")
        assert {a["status"] for a in rows.values()} >= {"idle", "working", "starting"}
    finally:
        os.kill(orcr_home.proc.pid, signal.SIGCONT)
    with orcr_home.sdk() as o:
        for path in ("g/idle", "t/turn", "s/stuck"):
            until(lambda p=path: o.list(p) == [], 30, f"{path} to end")
        until(lambda: o.status()["drift"]["unmarked_panes"] == 1, 30, "reconciliation ran")
        assert o.get("w/work")["status"] == "working"
        # the late pane of the stuck start, once start() returned: closed
        until(lambda: _late_pane_closed("s/stuck"), 30, "the late pane closed")
    assert _ends(orcr_home, g["uuid"]) == ["gc"]
    assert _ends(orcr_home, t["uuid"]) == ["timeout"]
    assert _ends(orcr_home, s["uuid"]) == ["failed"]
    assert _ends(orcr_home, w["uuid"]) == []
    closes = [e for e in td.read_state()["log"] if e[0] == "close"]
    assert len(closes) == len({e[1] for e in closes}) == 3, closes  # each pane closed once
    for uuid in (g["uuid"], t["uuid"], s["uuid"]):
        assert len(_events(orcr_home, uuid, "pane.close_requested")) == 1
    starts = [e for e in td.read_state()["log"] if e[0] == "start"]
    assert sorted(e[1] for e in starts) == ["g/idle", "s/stuck", "t/turn", "w/work"]


def _late_pane_closed(label: str) -> bool:
    state = td.read_state()
    started = [e[2] for e in state["log"] if e[0] == "start" and e[1] == label]
    return bool(started) and all(p not in state["panes"] for p in started)


def _reboot(live) -> None:
    """The server and the multiplexer go down together, and come back."""
    live.kill_server()
    if live.mux.kind == "tmux":
        subprocess.run(["tmux", "-S", str(live.mux.socket), "kill-server"], check=True)
    else:
        live.mux.emulator.restart()  # herdr restores its panes, as shells
    live.start_server()


def _explained(home) -> list[str]:
    """Every row's status is the last status its events name."""
    import sqlite3

    conn = sqlite3.connect(home.path / "store.db")
    try:
        rows = conn.execute("SELECT uuid, path, status FROM agent").fetchall()
    finally:
        conn.close()
    problems = []
    for uuid, path, status in rows:
        moves = [d["to"] for d in _events(home, uuid, "agent.status")]
        if (moves[-1] if moves else "queued") != status:
            problems.append(f"{path}: {status}, events say {moves}")
    return problems


@pytest.mark.parametrize("auto", [False, True], ids=["agent-resume", "resume_lost"])
def test_a_reboot_doubles_nothing_and_lost_agents_resume(live, auto):
    live.config(
        live.mux.config()
        + '[timings]\npoll_every = "50ms"\n[concurrency]\nmax = 2\n'
        + ("[recovery]\nresume_lost = true\n" if auto else "")
    )
    live.start_server()
    for path in ("e/a", "e/b"):
        live.run("agent", "run", "-p", "echo", "--path", path, f"first {path}", check=True)
        live.run("agent", "wait", path, "--timeout", "30s", check=True)
    live.run("agent", "run", "-p", "echo", "--path", "e/c", "first e/c", check=True)
    assert live.get("e/c")["status"] == "queued"  # behind the cap
    uuids = {p: live.get(p)["uuid"] for p in ("e/a", "e/b", "e/c")}

    _reboot(live)

    if not auto:
        for path in ("e/a", "e/b"):
            row = until(lambda p=path: (a := live.get(p))["status"] == "ended" and a, 60)
            assert row["exit_reason"] == "lost"
            live.run("agent", "resume", path, check=True)
    # e/c, queued before the reboot, starts first; one resumed agent takes the
    # other slot and the second waits behind the cap like any start
    live.run("agent", "wait", "e/c", "--timeout", "60s", check=True)
    assert live.run("agent", "read", "e/c", check=True).stdout == "first e/c\n"

    def one_resumed():
        st = sorted(live.get(p)["status"] for p in ("e/a", "e/b"))
        return st == ["idle", "queued"]

    until(one_resumed, 60, "one resumed, one waiting behind the cap")
    live.run("agent", "kill", "e/c", check=True)
    for path in ("e/a", "e/b"):
        live.run("agent", "wait", path, "--timeout", "60s", check=True)
    assert live.mux.labels() == ["e/a", "e/b"]  # one pane each: nothing doubled
    assert _explained(live) == []
    for path in ("e/a", "e/b"):
        requeued = [d for d in _events(live, uuids[path], "agent.status") if d["to"] == "queued"]
        assert len(requeued) == 1 and requeued[0]["resume"] is True
        assert bool(requeued[0].get("auto")) == auto
        assert live.get(path)["uuid"] == uuids[path]
    # e/c had never started: it started once, as a plain start
    starts = _events(live, uuids["e/c"], "pane.start_requested")
    assert len(starts) == 1 and "--resume" not in starts[0]["argv"]
    # the resumed agents take their next turn in their own sessions
    live.run("agent", "send", "e/a", "second", check=True)
    live.run("agent", "wait", "e/a", "--timeout", "30s", check=True)
    assert live.run("agent", "read", "e/a", check=True).stdout == "second\n"
