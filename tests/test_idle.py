"""Idle cost (issue 9): no write transaction without a change; transcript turn ends and
pane losses arrive as notifications, with polling only as the fallback."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "plugins"))
import orcr_test_driver as td  # noqa: E402

from orcr_core.kit.testing import until  # noqa: E402

#: Neither the poll nor the periodic pass can explain anything within a test.
NO_POLLING = '[timings]\npoll_every = "1h"\nreconcile_every = "1h"\n'


def _quiet_writes(home, seconds: float = 3.0) -> tuple[int, int, dict]:
    """Write transactions at the start and the end of a window of idleness."""
    before = home.status()
    time.sleep(seconds)  # the observation window itself, not a synchronisation
    after = home.status()
    return before["write_transactions"], after["write_transactions"], after


def test_fifty_idle_agents_cause_no_write_transaction(orcr_home):
    orcr_home.config(
        '[driver]\nname = "test"\n[concurrency]\nmax = 60\n'
        '[timings]\npoll_every = "50ms"\nprompt_confirm = "200ms"\n'
    )
    orcr_home.start_server()
    with orcr_home.sdk() as o:
        for n in range(50):
            o.run("x", provider="testp", path=f"fleet/a{n}", cwd="/")
        until(lambda: all(a["status"] == "working" for a in o.list()) and len(o.list()) == 50)
        for pane_id in td.read_state()["panes"]:
            td.set_status(pane_id, "idle")
        until(lambda: all(a["status"] == "idle" for a in o.list()), what="50 idle agents")
    wal = orcr_home.path / "store.db-wal"
    size = wal.stat().st_size if wal.exists() else 0
    first, last, status = _quiet_writes(orcr_home)
    assert last == first, f"{last - first} write transactions while 50 agents sat idle"
    assert (wal.stat().st_size if wal.exists() else 0) == size
    # the monitor kept looking (the test driver has no events: it polls snapshots)
    assert status["monitor"]["snapshots"] > 10


def test_retention_with_nothing_to_delete_opens_no_write(tmp_path):
    from orcr_core.store import events
    from orcr_core.store.db import close_store, open_store
    from orcr_core.store.models import db

    open_store(tmp_path / "store.db")
    try:
        with db.atomic("IMMEDIATE"):
            for _ in range(5):
                events.emit("test.event")
        bus = events.Bus()
        before = db.write_transactions
        assert events.apply_retention(bus, keep=10) == 0
        assert events.apply_retention(bus, keep=2) == 3
        assert events.apply_retention(bus, keep=2) == 0
        assert db.write_transactions == before + 1
    finally:
        close_store()


def _echo(live, path: str, prompt: str = "hi") -> str:
    out = live.run("agent", "run", "--provider", "echo", "--path", path, prompt, check=True)
    return out.stdout.split()[1]


def test_idle_echo_fleet_writes_nothing_and_takes_no_snapshot(live):
    # no periodic pass (30 s by default, about this test's length under load): it
    # takes a snapshot by design, and the window below must see none
    live.config(live.mux.config() + '[timings]\npoll_every = "50ms"\nreconcile_every = "1h"\n')
    live.start_server()
    for n in range(4):
        _echo(live, f"quiet/a{n}")
    for n in range(4):
        live.run("agent", "wait", f"quiet/a{n}", "--timeout", "60s", check=True)
    until(lambda: live.status()["monitor"]["pane_events"], what="the multiplexer's event stream")
    until(lambda: live.status()["monitor"]["transcripts_notified"] == 4)
    # the notifier (herdr's own sink is on with the herdr driver) makes its read
    # cursor durable once, at the first quiet moment after the fleet's last event
    until(lambda: live.status()["notify"]["settled"], 30, what="the notifier's cursor saved")
    first, last, status = _quiet_writes(live)
    assert last == first
    # event-driven: with every transcript watched and the pane events live, a
    # steady fleet needs no snapshot between the periodic passes
    before = status["monitor"]["snapshots"]
    time.sleep(1.0)  # an observation window
    assert live.status()["monitor"]["snapshots"] == before


def test_turn_end_comes_from_the_notification(live):
    """poll_every and reconcile_every are an hour: only the notification can explain it."""
    live.config(live.mux.config() + NO_POLLING)
    live.start_server()
    _echo(live, "note/a", "first")
    live.run("agent", "wait", "note/a", "--timeout", "30s", check=True)
    assert live.run("agent", "read", "note/a", check=True).stdout == "first\n"
    t0 = time.monotonic()
    live.run("agent", "send", "note/a", "second", check=True)
    live.run("agent", "wait", "note/a", "--timeout", "30s", check=True)
    assert time.monotonic() - t0 < 20
    assert live.run("agent", "read", "note/a", check=True).stdout == "second\n"
    assert live.status()["monitor"]["transcripts_notified"] == 1


def test_past_the_watch_limit_transcripts_are_polled(live):
    """The facility is exhausted after one watch: the other agents fall back to polling
    and every turn end is still seen."""
    live.config(live.mux.config() + '[timings]\npoll_every = "50ms"\nreconcile_every = "1h"\n')
    live.start_server(extra_env={"ORCR_WATCH_LIMIT": "1"})
    for n in range(3):
        _echo(live, f"lim/a{n}", f"one {n}")
    for n in range(3):
        live.run("agent", "wait", f"lim/a{n}", "--timeout", "30s", check=True)
    for n in range(3):
        live.run("agent", "send", f"lim/a{n}", f"two {n}", check=True)
    for n in range(3):
        live.run("agent", "wait", f"lim/a{n}", "--timeout", "30s", check=True)
        assert live.run("agent", "read", f"lim/a{n}", check=True).stdout == f"two {n}\n"
    mon = live.status()["monitor"]
    assert (mon["transcripts_notified"], mon["transcripts_polled"]) == (1, 2)
    assert "limit" in mon["notifications_error"]


def test_without_notifications_every_transcript_is_polled(live):
    live.start_server(extra_env={"ORCR_WATCH_LIMIT": "0"})
    _echo(live, "off/a", "one")
    live.run("agent", "wait", "off/a", "--timeout", "30s", check=True)
    live.run("agent", "send", "off/a", "two", check=True)
    live.run("agent", "wait", "off/a", "--timeout", "30s", check=True)
    mon = live.status()["monitor"]
    assert (mon["notifications"], mon["transcripts_polled"]) == ("off", 1)


def _kill_pane_outside_orcr(live, pane_id: str) -> None:
    if live.mux.kind == "tmux":
        subprocess.run(
            ["tmux", "-S", str(live.mux.socket), "kill-pane", "-t", pane_id],
            check=True,
            capture_output=True,
        )
    else:
        from orcr_herdr.client import HerdrClient

        HerdrClient(str(live.mux.socket)).request("pane.close", {"pane_id": pane_id})


def test_pane_killed_outside_orcr_is_noticed_through_the_multiplexer(live):
    """No poll and no periodic pass within the test: the multiplexer's event explains it."""
    live.config(live.mux.config() + NO_POLLING)
    live.start_server()
    _echo(live, "ext/a")
    live.run("agent", "wait", "ext/a", "--timeout", "30s", check=True)
    until(lambda: live.status()["monitor"]["pane_events"], what="the multiplexer's event stream")
    pane_id = live.get("ext/a")["pane_id"]
    _kill_pane_outside_orcr(live, pane_id)
    a = until(
        lambda: (lambda a: a if a["status"] == "ended" else None)(live.get("ext/a")),
        what="the agent to end",
    )
    assert a["exit_reason"] == "lost"
    kinds = [
        (e["data"].get("from"), e["data"].get("to"))
        for e in live.events()
        if e["kind"] == "agent.status"
    ]
    assert kinds[-2:] == [("idle", "lost"), ("lost", "ended")]


def test_agent_exit_is_noticed_through_the_multiplexer(live):
    live.config(live.mux.config() + NO_POLLING)
    live.start_server()
    _echo(live, "ext/first")  # the workspace exists, so the event stream can attach
    live.run("agent", "wait", "ext/first", "--timeout", "30s", check=True)
    until(lambda: live.status()["monitor"]["pane_events"], what="the multiplexer's event stream")
    _echo(live, "ext/bye", "[exit] bye")
    r = live.run("agent", "wait", "ext/bye", "--until", "ended", "--timeout", "30s", "--json")
    assert json.loads(r.stdout)["exit_reason"] == "exited", r.stderr


def test_timers_fire_from_the_heap_with_polling_off(live):
    """Turn timeout and GC with no poll and no periodic pass: only the timer heap acts.
    The one end-to-end test of both (their rules: tests/test_timers_clock.py, on a fake
    clock): ``agent wait`` on a timed-out turn exits 5 saying so, GC ends an idle agent
    right after its turn, and both panes close."""
    live.config(live.mux.config() + NO_POLLING + 'gc_after = "2s"\n')
    live.start_server()
    gc_uuid = _echo(live, "clock/gc")
    live.run("agent", "run", "--provider", "echo", "--path", "clock/slow", "--timeout", "1s",
             "[sleep 30] x", check=True)  # fmt: skip
    r = live.run("agent", "wait", "clock/slow", "--timeout", "30s")
    assert r.returncode == 5 and "timeout" in r.stderr, (r.returncode, r.stderr)
    for path, reason in (("clock/slow", "timeout"), ("clock/gc", "gc")):
        live.run("agent", "wait", path, "--until", "ended", "--timeout", "30s")
        a = live.get(path)
        assert (a["status"], a["exit_reason"]) == ("ended", reason)
    moves = [
        (e["data"]["from"], e["data"]["to"])
        for e in live.events(gc_uuid)
        if e["kind"] == "agent.status"
    ]
    assert moves[-2:] == [("working", "idle"), ("idle", "ended")], moves  # its turn, then GC
    until(lambda: live.mux.labels() == [], what="the panes to close")


def test_what_happened_while_the_server_was_down_is_made_up_at_start(live):
    """No notification can report what happened before the server ran: the start pass
    reads every transcript (poll and periodic pass are an hour). A working agent's turn
    ends and a turn starts in an idle agent's pane while the server is down."""
    live.config(live.mux.config() + NO_POLLING)
    live.start_server()
    idle = _echo(live, "down/idle", "one")
    live.run("agent", "wait", "down/idle", "--timeout", "30s", check=True)
    busy = _echo(live, "down/busy", "[sleep 2] later")
    until(lambda: live.get("down/busy")["status"] == "working", what="the turn to start")
    live.kill_server()
    transcript = live.path / "agents" / busy / "echo.jsonl"
    until(lambda: '"turn_end"' in transcript.read_text(), what="the turn to end, unobserved")
    with (live.path / "agents" / idle / "echo.jsonl").open("a") as f:  # typed in the pane
        f.write(json.dumps({"type": "prompt", "turn": 2, "text": "typed"}) + "\n")
    live.start_server()
    live.run("agent", "wait", "down/busy", "--timeout", "30s", check=True)
    assert live.run("agent", "read", "down/busy", check=True).stdout == "later\n"
    until(lambda: live.get("down/idle")["status"] == "working", what="the pane's turn")


@pytest.mark.parametrize("sink", [False, True])
def test_without_a_notification_sink_the_notifier_writes_nothing(
    server_home, monkeypatch, request, sink
):
    """No sink configured (no [notify]): the notifier follows the event log in memory
    only, so a finished burst leaves no cursor write behind for idle time. With a sink,
    the same quiet moment does write the cursor (the window is long enough to see it).

    In the test process (tests/_support/inproc.py): the real notifier's threads on the
    real store, the quiet moment (``CURSOR_EVERY``, 10 s) made 0.2 s, so the window is
    1 s, not 11 s and a server. Planted: the matcher's quiet-moment write without its
    ``self.sinks`` check, and ``_saved`` not following the cursor without a sink ->
    ``[False]`` fails (one write)."""
    from orcr_core.notify import outbox
    from orcr_core.store import events
    from orcr_core.store.models import db

    config = '[driver]\nname = "test"\n'
    if sink:
        config += '[notify.webhook]\nurl = "http://127.0.0.1:9/"\n'
    (server_home / "config.toml").write_text(config)
    monkeypatch.setattr(outbox, "CURSOR_EVERY", 0.2)
    srv = request.getfixturevalue("server_in_process")  # on the config just written
    notifier = outbox.Notifier(srv)
    notifier.start()
    assert (notifier.status()["sinks"] != []) == sink
    first = db.write_transactions
    with db.atomic("IMMEDIATE"):  # a burst no rule matches: no notification rows
        for n in range(5):
            events.emit("test.burst", None, n=n)
    srv.bus.notify()
    until(lambda: notifier.cursor == events.last_seq(), 10, what="the burst matched")
    time.sleep(1.0)  # the quiet moment under test (5 CURSOR_EVERY), not a synchronisation
    # the burst's own write, and with a sink the cursor's (at the match or the quiet
    # moment after it, whichever comes first on this machine)
    assert db.write_transactions - first == (2 if sink else 1)


def test_timers_forget_drops_only_agents_gone_and_skips_when_none_are():
    """The monitor calls Timers.forget after every reload; it rebuilds the heap only
    when an agent left. Planted: forget() a no-op -> b's guard fires -> fails;
    an agent's count dropped at its first due entry -> a's later entry kept -> fails."""
    from orcr_core.agents.timers import Timers

    t = Timers()
    t.arm(1.0, "a", "guard")
    t.arm(5.0, "a", "gc")
    t.arm(2.0, "b", "guard")
    t.arm(3.0, "", "loop")
    heap = t._heap
    t.forget({"a", "b"})
    assert t._heap is heap and len(t) == 4  # nobody left: untouched
    t.forget({"a"})
    assert t.due(2.5) == [("a", "guard")]  # b's guard is gone with b
    t.forget({"b"})  # a leaves: its gc entry goes too, the agentless one stays
    assert t.due(10.0) == [("", "loop")]


def test_a_restore_awaited_for_seconds_keeps_one_look_again_timer(monkeypatch):
    """A pane whose herdr restore may be under way is looked at again 1 s after each
    step (``panes._confirm_later`` with ``first_seen`` = now). Each step armed one
    more entry at a later instant, and each entry's step armed another: the steps
    grew by the poll rate every second (the [herdr] resume tests made ~200 snapshots
    and 200 pane.process_info calls a second by the end of the 10 s grace). Planted:
    ``_confirm_later`` arming with ``Timers.arm`` -> a second entry pending at the
    second step -> fails."""
    from types import SimpleNamespace

    from orcr_core.agents import panes
    from orcr_core.agents.timers import Timers

    clock = SimpleNamespace(now=1000.0)
    fake_time = SimpleNamespace(time=lambda: clock.now, monotonic=lambda: clock.now)
    monkeypatch.setattr(panes, "time", fake_time)
    server = SimpleNamespace(monitor=SimpleNamespace(timers=Timers()))
    timers = server.monitor.timers
    fired_in_last_second = 0
    for step in range(200):  # a step every poll_every (50 ms) for 10 s, as the wait lasts
        clock.now = 1000.0 + step * 0.05
        fired = timers.due(clock.now)
        if step >= 180:
            fired_in_last_second += len(fired)
        panes._confirm_later(server, clock.now)  # the "wait" branch's call
        assert len(timers) <= 1, (step, len(timers))
    assert fired_in_last_second <= 1
