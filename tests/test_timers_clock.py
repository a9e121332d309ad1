"""The monitor's timers on a fake clock: idle GC, a turn's timeout, the stuck-start
guard (and a dialog's wait) and the stalled flag, each to the second it is due,
without waiting it out.

A real :class:`~orcr_core.server.app.Server` in the test process, not serving: its
real monitor, timer heap, store (SQLite), registry (the echo provider, the test
driver and its ``testp`` provider, ``orcr_testing/plugins``) and driver. The clock
seam (:mod:`orcr_core.common.clock`) is on the ``fake_clock`` fixture, so every
timestamp the lifecycle writes and every deadline the monitor computes is on a clock
the test advances; a monitor pass is :meth:`Monitor.step` called here, as its thread
calls it after a wakeup. ``poll_every`` and ``reconcile_every`` are an hour: only the
timer heap can explain an action. The end-to-end tests of the same behaviours on a
real server and multiplexer, one each, are ``tests/test_idle.py::
test_timers_fire_from_the_heap_with_polling_off`` (timeout, GC),
``tests/test_stalled.py::test_a_silent_working_agent_is_flagged_survives_a_crash_and_
growth_clears_it`` and ``tests/test_kill_and_guard.py::
test_stuck_start_guard_fails_and_frees_slot``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from orcr_core.store import db as store_db
from orcr_core.store.models import Agent, Event

CONFIG = (
    '[driver]\nname = "test"\n[timings]\npoll_every = "1h"\nreconcile_every = "1h"\n'
    'gc_after = "1h"\nmax_starting = "2m"\nstall_after = "5m"\ndialog_wait = "10m"\n'
)


@pytest.fixture
def config(server_home):
    (server_home / "config.toml").write_text(CONFIG)


@pytest.fixture
def srv(config, fake_clock, server_in_process):
    """The server object (tests/_support/inproc.py) on the fake clock; CONFIG's timers."""
    return server_in_process


def _td():
    return sys.modules["orcr_test_driver"]


def _agent(srv, pane_id: str = "%1", **fields) -> Agent:
    """A row as the pipeline leaves it, its pane alive in the test driver."""
    row = dict(uuid="u1", path="t/a", name="a", provider="testp", queue_seq=1, cwd="/",
               created_at=0.0, pane_id=pane_id, tab_id="w:t0", workspace_id="w",
               turn=1, launch_token=f"tok{pane_id}")  # fmt: skip
    row.update(fields)
    from orcr_core import dirs

    _td().add_pane(pane_id, row["path"], instance=dirs.instance_id(), token=row["launch_token"])
    if row["status"] == "working":  # testp's turns follow its pane's status
        _td().set_status(pane_id, "working")
    data_dir = srv.agents_dir / row["uuid"]
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / "launch.json").write_text(json.dumps({"uuid": row["uuid"], "argv": None}))
    return Agent.create(**row)


def _pass(srv, reload: bool = False) -> None:
    """One monitor pass after a wakeup (the timer heap's, or a write's with ``reload``)."""
    srv.monitor.step(set(), False, False, reload)


def _row() -> Agent:
    return Agent.get(Agent.uuid == "u1")


def _closed(pane_id: str) -> bool:
    return ["close", pane_id] in _td().read_state()["log"]


def _ended(pane_id: str, reason: str, error: str | None = None) -> None:
    """Assert the agent ended for ``reason`` (with ``error`` when given) and its pane
    was closed."""
    row = _row()
    assert (row.status, row.exit_reason) == ("ended", reason)
    if error is not None:
        assert row.error == error
    assert _closed(pane_id)


def test_idle_gc_ends_the_agent_at_idle_since_plus_gc_after(srv, fake_clock):
    """Planted: the GC deadline armed at ``idle_since`` alone (no ``gc_after``) -> the
    agent ends at once, fails; ``_agent`` compares ``<=`` with a ``gc_after`` of 0 ->
    fails."""
    t0 = fake_clock.time()
    a = _agent(srv, status="idle", idle_since=t0)
    _pass(srv, reload=True)
    assert srv.monitor.timers.next_at() == t0 + 3600
    fake_clock.advance(3599.5)
    _pass(srv)
    assert _row().status == "idle" and not _closed(a.pane_id)
    fake_clock.advance(1.0)
    _pass(srv)
    _ended(a.pane_id, "gc")
    # its own --gc-after wins over timings.gc_after
    b = _agent(srv, "%2", uuid="u2", path="t/b", queue_seq=2, status="idle",
               idle_since=fake_clock.time(), gc_after=30.0)  # fmt: skip
    _pass(srv, reload=True)
    fake_clock.advance(29)
    _pass(srv)
    assert Agent.get(Agent.uuid == "u2").status == "idle"
    fake_clock.advance(2)
    _pass(srv)
    assert Agent.get(Agent.uuid == "u2").exit_reason == "gc" and _closed(b.pane_id)


def test_a_write_keeps_unchanged_rows_and_a_config_change_re_arms_them(
    srv, fake_clock, server_home
):
    """A reload after a write makes again only the rows the store holds differently
    (bench/idle.py: re-making and re-arming 250 rows after each write was most of a
    turn end's latency); a config change re-arms every row's timers.
    Planted: ``Monitor.rearm`` not asking for a full re-arm -> GC waits the old hour,
    fails; ``_same`` always False -> the unchanged row is made again, fails."""
    t0 = fake_clock.time()
    _agent(srv, status="idle", idle_since=t0)
    _agent(srv, "%2", uuid="u2", path="t/b", queue_seq=2, status="idle", idle_since=t0)
    _pass(srv, reload=True)
    kept = srv.monitor.agents["u1"]
    Agent.update(idle_since=t0 + 10).where(Agent.uuid == "u2").execute()  # another writer
    _pass(srv, reload=True)
    assert srv.monitor.agents["u1"] is kept  # the same row: the same object, its timers
    assert srv.monitor.agents["u2"].idle_since == t0 + 10  # a changed row: made again
    kept.__data__["status"] = "working"  # as a transition whose commit was refused leaves it
    _pass(srv, reload=True)
    assert srv.monitor.agents["u1"] is not kept and srv.monitor.agents["u1"].status == "idle"
    (server_home / "config.toml").write_text(CONFIG.replace('gc_after = "1h"', 'gc_after = "1m"'))
    assert "timings.gc_after" in srv.reload_config()
    _pass(srv, reload=True)
    for uuid, at in (("u1", 61), ("u2", 71)):  # each at its idle_since + the new minute
        fake_clock.advance(at - (fake_clock.time() - t0))
        _pass(srv)
        assert Agent.get(Agent.uuid == uuid).exit_reason == "gc"


def test_a_turn_that_outlives_its_timeout_ends_timeout(srv, fake_clock):
    """Planted: the timeout compared with ``started_at`` + 2*timeout -> still working at
    the deadline, fails."""
    t0 = fake_clock.time()
    a = _agent(srv, status="working", timeout=90.0, turn_started_at=t0)
    _pass(srv, reload=True)
    fake_clock.advance(89)
    _pass(srv)
    assert _row().status == "working"
    fake_clock.advance(2)
    _pass(srv)
    _ended(a.pane_id, "timeout", "turn ran past its timeout of 90s")


def test_the_stuck_start_guard_counts_from_the_last_progress_marker(srv, fake_clock):
    """A start whose driver call hangs (its pipeline job still running) is failed once
    ``max_starting`` passes with no progress marker; a marker moves the deadline.

    Planted: the guard armed at ``started_at`` instead of ``last_progress_at`` -> ends
    at t0+2m although progress came at t0+90s, fails."""
    t0 = fake_clock.time()
    a = _agent(srv, status="starting", started_at=t0, last_progress_at=t0)
    srv._active_pipelines.add(a.uuid)  # its start call hangs in the driver
    _pass(srv, reload=True)
    fake_clock.advance(90)
    with store_db.db.atomic("IMMEDIATE"):  # the pipeline records a progress marker
        from orcr_core.agents import lifecycle

        lifecycle.update(_row(), "pane.workspace_applied", last_progress_at=fake_clock.time())
    _pass(srv, reload=True)
    fake_clock.advance(31)  # t0 + 121 s: one guard after started_at, not after the marker
    _pass(srv)
    assert _row().status == "starting"
    fake_clock.advance(90)  # the marker + 121 s
    _pass(srv)
    _ended(a.pane_id, "failed", "stuck-start guard: no progress for 120s (timings.max_starting)")


def test_a_dialog_waits_dialog_wait_not_the_stuck_start_guard(srv, fake_clock):
    """A start blocked on a dialog (a person is asked) is held to ``dialog_wait``, not
    ``max_starting``, counted from when the dialog showed.

    Planted: the blocked branch compared with ``max_starting`` -> ended at t0+3m, fails;
    its timer armed at ``max_starting`` -> fails."""
    t0 = fake_clock.time()
    a = _agent(srv, status="starting", started_at=t0, last_progress_at=t0,
               blocked_reason="trust this folder?", blocked_at=t0)  # fmt: skip
    srv._active_pipelines.add(a.uuid)  # its pipeline waits on the answer
    _pass(srv, reload=True)
    assert srv.monitor.timers.next_at() == t0 + 600
    fake_clock.advance(180)  # past max_starting
    srv.monitor.step({a.uuid}, False, False, False)
    assert _row().status == "starting"
    fake_clock.advance(421)
    _pass(srv)
    _ended(
        a.pane_id,
        "failed",
        "a dialog went unanswered for 600s (timings.dialog_wait): trust this folder?",
    )


def _transcript(srv, path, fake_clock, *records) -> None:
    with open(path, "a") as f:
        for record in records:
            f.write(json.dumps(record) + "\n")
    now = fake_clock.time()
    os.utime(path, (now, now))  # written at the fake clock's now


def _flags() -> list[bool]:
    return [
        json.loads(e.data)["stalled"]
        for e in Event.select().where(Event.kind == "agent.stalled").order_by(Event.seq)
    ]


def _working_on_a_transcript(srv, fake_clock) -> tuple[float, Path]:
    """A working ``echo`` agent ``u1`` whose session is an orcr transcript (the stall
    timer's input), started at the fake clock's now and loaded by a pass; (now, path)."""
    t0 = fake_clock.time()
    path = srv.agents_dir / "u1" / "transcript.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    _transcript(srv, path, fake_clock, {"type": "session"}, {"type": "prompt", "turn": 1})
    _agent(srv, provider="echo", status="working", turn_started_at=t0,
           agent_session_source="orcr", agent_session_kind="path",
           agent_session_value=str(path))  # fmt: skip
    _pass(srv, reload=True)
    return t0, path


def test_growth_moves_the_stall_timer_and_silence_for_stall_after_flags(srv, fake_clock):
    """Growth more often than ``stall_after`` never flags (the timer fires at the old
    deadline, finds the later growth and re-arms); silence for ``stall_after`` does,
    and growth clears it. A kill of a stalled agent clears it with its own event.

    Planted: ``_arm_stall`` keeps an earlier armed entry when growth moved the deadline
    (no re-arm on retry) -> never flagged, fails; ``stall.check`` flags at ``now -
    grew >= after/2`` -> flagged during the growth, fails."""
    t0, path = _working_on_a_transcript(srv, fake_clock)
    _pass(srv)  # the reader exists now: the stall timer is armed at the growth + 5m
    assert srv.monitor._stall_at["u1"] == t0 + 300
    for _ in range(7):  # grows every 2 minutes for 14 minutes: past two deadlines
        fake_clock.advance(120)
        _transcript(srv, path, fake_clock, {"type": "note", "text": "still at it"})
        _pass(srv)
    assert _flags() == [] and _row().stalled_at is None
    grew = fake_clock.time()
    fake_clock.advance(299)
    _pass(srv)
    assert _flags() == []
    fake_clock.advance(1)
    _pass(srv)
    row = _row()
    assert (row.status, row.stalled_at, _flags()) == ("working", grew + 300, [True])
    flagged = json.loads(Event.select().where(Event.kind == "agent.stalled").get().data)
    assert flagged["silent_for"] == 300.0

    # growth clears it (the transcript's notification is the dirty set)
    fake_clock.advance(60)
    _transcript(srv, path, fake_clock, {"type": "note", "text": "back"})
    srv.monitor.step({"u1"}, False, False, False)
    assert (_row().stalled_at, _flags()) == (None, [True, False])

    # flagged again, then a kill ends it and clears the flag with the status change
    fake_clock.advance(300)
    _pass(srv)
    assert _flags() == [True, False, True]
    from orcr_core.agents import pipeline

    pipeline.end(srv, _row(), "killed")
    events = [json.loads(e.data) for e in Event.select().where(Event.kind == "agent.stalled")]
    assert [e["stalled"] for e in events] == [True, False, True, False]
    assert events[-1]["status"] == "ended" and _row().stalled_at is None


def test_a_stall_after_of_zero_arms_no_stall_timer(srv, fake_clock):
    """Planted: ``stall.deadline`` ignoring ``stall_after = 0`` -> flagged, fails."""
    srv.config.data["timings"]["stall_after"] = 0
    _working_on_a_transcript(srv, fake_clock)
    _pass(srv)
    fake_clock.advance(30 * 86400)
    srv.monitor.step({"u1"}, True, False, True)
    assert "u1" not in srv.monitor._stall_at
    assert (_row().status, _row().stalled_at, _flags()) == ("working", None, [])
