"""The scheduler's decisions with an injected clock (nothing is slept): fires,
coalescing at capacity, the skip policy, missed fires after a simulated sleep,
names and their release, pause."""

from __future__ import annotations

import json
import uuid as uuidlib

import pytest

from orcr_core.common import clock as _clock
from orcr_core.loops import control, defs, runs
from orcr_core.loops.fires import fire_due
from orcr_core.store import db as store_db
from orcr_core.store.models import Event, Loop, LoopRun, db

T0 = 1_780_000_020.0  # 2026-05-28 20:27:00 UTC, a whole minute
MISSED_AFTER = 60.0


@pytest.fixture
def store(short_tmp):
    store_db.open_store(short_tmp / "store.db")
    yield
    store_db.close_store()


def _create(name="nightly", cron="*/5 * * * *", now=T0, **kw):
    params = dict(name=name, cron=cron, tz="UTC", argv=["/bin/true"], cwd="/", **kw)
    return defs.create(params, now=now)


def _events(kind=None):
    q = Event.select().order_by(Event.seq)
    return [(e.kind, json.loads(e.data)) for e in q if kind is None or e.kind == kind]


def _occupy(loop: Loop) -> LoopRun:
    """A run holding the loop's only slot (as if its command were running)."""
    with db.atomic("IMMEDIATE"):
        run = runs.allocate(loop, "manual", T0, T0)
        runs.set_status(run, "running", T0, started_at=T0)
    return run


def test_a_due_fire_allocates_a_run_and_advances(store):
    loop = _create()
    first = loop.next_fire_at
    assert first == T0 + 180  # 20:30
    assert fire_due(first - 1, MISSED_AFTER) == []
    (started,) = fire_due(first + 0.01, MISSED_AFTER)
    run = LoopRun.get(LoopRun.loop == loop.uuid)
    assert started.uuid == run.uuid
    # a free slot: the run is running from the fire's own transaction
    assert (run.status, run.kind, run.due_at) == ("running", "scheduled", first)
    assert runs.RUN_ID.fullmatch(run.run_id)
    assert Loop.get_by_id(loop.uuid).next_fire_at == first + 300
    assert [k for k, _ in _events()][-3:] == ["run.status", "loop.fired", "run.status"]


def test_fires_at_capacity_coalesce_into_one_pending_run_with_the_earliest_due(store):
    loop = _create()
    _occupy(loop)
    dues = []
    for _ in range(4):
        due = Loop.get_by_id(loop.uuid).next_fire_at
        dues.append(due)
        assert fire_due(due, MISSED_AFTER) == []  # at capacity: nothing starts
    pending = list(LoopRun.select().where(LoopRun.status == "pending"))
    assert len(pending) == 1
    assert (pending[0].due_at, pending[0].fires, pending[0].kind) == (dues[0], 4, "scheduled")
    assert len(_events("loop.coalesced")) == 3
    # a manual run always gets its own row
    with db.atomic("IMMEDIATE"):
        runs.allocate(Loop.get_by_id(loop.uuid), "manual", T0 + 9999, T0 + 9999)
    assert LoopRun.select().where(LoopRun.status == "pending").count() == 2


def test_skip_policy_drops_the_fire_at_capacity(store):
    loop = _create(overlap="skip")
    _occupy(loop)
    due = loop.next_fire_at
    assert fire_due(due, MISSED_AFTER) == []
    assert LoopRun.select().where(LoopRun.status == "pending").count() == 0
    ((kind, data),) = _events("loop.skipped")
    assert data["active"] == 1
    assert Loop.get_by_id(loop.uuid).next_fire_at == due + 300  # the cadence goes on


def test_max_concurrency_two_fires_twice_before_queueing(store):
    loop = _create(max_concurrency=2)
    _occupy(loop)
    (run,) = fire_due(loop.next_fire_at, MISSED_AFTER)  # one slot was free
    assert run.status == "running"


def test_missed_fires_after_a_sleep_are_skipped_and_logged_not_replayed(store):
    loop = _create()
    due = loop.next_fire_at
    woke = due + 3 * 3600 + 42  # the machine slept three hours
    assert fire_due(woke, MISSED_AFTER) == []
    assert LoopRun.select().count() == 0  # nothing fired late
    ((kind, data),) = _events("loop.missed")
    assert data["count"] == 37  # 20:30 .. 23:30 every 5 minutes
    nxt = Loop.get_by_id(loop.uuid).next_fire_at
    assert woke < nxt <= woke + 300  # the next fire is in the future
    # a fire late by less than loops.missed_after still runs
    assert [r.loop for r in fire_due(nxt + MISSED_AFTER - 1, MISSED_AFTER)] == [loop.uuid]


def test_a_fire_is_decided_at_the_time_its_transaction_records_it(store):
    """The tick read the clock on time, then the machine slept (or the store was busy)
    before the fire's transaction: with the scheduler's clock read again there, the
    fire is missed, not recorded 72 s late. Planted: the tick's time used -> fired."""
    loop = _create()
    due = loop.next_fire_at
    times = iter([due + 72])
    assert fire_due(due + 0.5, 1.0, clock=lambda: next(times)) == []
    assert LoopRun.select().count() == 0
    ((_, data),) = _events("loop.missed")
    assert data["late_by"] == 72


def test_a_wall_clock_jump_during_a_fire_does_not_stamp_it_late(store):
    """The soak's seed 2803 (``once141``): the fire is decided on time, then the wall
    clock jumps 45 s forward (a suspend, an NTP step) before its transaction writes its
    events. Every event of the fire carries the instant it was decided, the one its
    rows record (run ``created_at``/``started_at``, the once loop's ``ended_at``), so
    it does not read as a missed fire replayed 45 s late. Planted: the events stamped
    with the clock at their write (``ts`` not passed in fires.py) -> fails (45 s)."""
    due = T0 + 60
    loop = defs.create(dict(name="once", once_at=due, tz="UTC", argv=["/bin/true"], cwd="/"), T0)
    fake = _clock.FakeClock(start=due + 0.004)

    def decided() -> float:  # the transaction reads the clock, then it jumps
        now = fake.time()
        fake.set_wall(now + 45)
        return now

    with _clock.use(fake):
        (run,) = fire_due(due, 1.0, clock=decided)
    run = LoopRun.get_by_id(run.uuid)
    ended = Loop.get_by_id(loop.uuid).ended_at
    assert run.created_at == run.started_at == ended == due + 0.004
    stamps = {e.kind: e.ts for e in Event.select().where(Event.loop == loop.uuid)}
    assert stamps.keys() >= {"loop.fired", "run.status", "loop.ended"}
    assert {k: round(t - due, 3) for k, t in stamps.items() if k != "loop.created"} == {
        "loop.fired": 0.004,
        "run.status": 0.004,
        "loop.ended": 0.004,
    }


def test_a_missed_once_fire_ends_the_loop(store):
    loop = defs.create(
        dict(name="once", once_at=T0 + 60, tz="UTC", argv=["/bin/true"], cwd="/"), now=T0
    )
    fire_due(T0 + 3600, MISSED_AFTER)
    row = Loop.get_by_id(loop.uuid)
    assert (row.status, row.end_reason) == ("ended", "missed")
    assert LoopRun.select().count() == 0


def test_a_once_loop_fires_once_then_releases_its_name(store):
    loop = defs.create(
        dict(name="once", once_at="10m", tz="UTC", argv=["/bin/true"], cwd="/"), now=T0
    )
    assert loop.next_fire_at == T0 + 600
    with pytest.raises(defs.LoopError) as exc:
        _create(name="once")
    assert exc.value.code == "name_in_use"
    fire_due(T0 + 600, MISSED_AFTER)
    assert (Loop.get_by_id(loop.uuid).status, Loop.get_by_id(loop.uuid).end_reason) == (
        "ended",
        "fired",
    )
    again = _create(
        name="once", now=T0 + 600
    )  # the name is free, a new definition with its own uuid
    assert again.uuid != loop.uuid
    assert defs.resolve("once").uuid == again.uuid  # the active definition first
    control.remove(again)
    assert defs.resolve("once").uuid == again.uuid  # then the most recent ended one


def test_names_are_one_segment_and_bad_input_is_refused(store):
    for bad in ("a/b", "Nightly", "", "x" * 65):
        with pytest.raises(defs.LoopError) as exc:
            _create(name=bad)
        assert exc.value.code == "invalid_name"
    with pytest.raises(defs.LoopError, match="in the past"):
        defs.create(dict(name="p", once_at=T0 - 1, tz="UTC", argv=["x"], cwd="/"), now=T0)
    with pytest.raises(defs.LoopError, match="five fields"):
        _create(cron="* * *")
    with pytest.raises(defs.LoopError, match="cwd"):
        defs.create(dict(name="c", cron="* * * * *", tz="UTC", argv=["x"], cwd="rel"), now=T0)
    assert Loop.select().count() == 0 and Event.select().count() == 0  # nothing written


def test_remove_cancels_pending_runs(store):
    loop = _create()
    _occupy(loop)
    fire_due(loop.next_fire_at, MISSED_AFTER)
    canceled = control.remove(loop)
    assert [r.status for r in LoopRun.select().where(LoopRun.uuid == canceled[0].uuid)] == [
        "canceled"
    ]
    assert Loop.get_by_id(loop.uuid).end_reason == "removed"


def test_pause_holds_fires_and_pending_runs_resume_counts_from_now(store):
    loop = _create()
    defs.pause(loop)
    assert fire_due(T0 + 86400, MISSED_AFTER) == []  # a paused loop never fires
    assert LoopRun.select().count() == 0
    with db.atomic("IMMEDIATE"):
        runs.allocate(Loop.get_by_id(loop.uuid), "manual", T0, T0)
    assert runs.take_pending(loop.uuid, T0) == []  # held while paused
    resumed = control.resume(Loop.get_by_id(loop.uuid), now=T0 + 86400)
    assert resumed.next_fire_at == T0 + 86400 + 180
    assert [r.status for r in runs.take_pending(loop.uuid, T0)] == ["running"]


def test_run_ids_are_unique_per_loop_name(store, monkeypatch):
    loop = _create()
    monkeypatch.setattr(runs.secrets, "choice", lambda alphabet: next(chars))
    chars = iter("aaaaa" + "aaaaa" + "bbbbb")
    with db.atomic("IMMEDIATE"):
        first = runs.allocate(loop, "manual", T0, T0)
        second = runs.allocate(loop, "manual", T0, T0)
    assert (first.run_id, second.run_id) == ("raaaaa", "rbbbbb")
    assert str(uuidlib.UUID(first.uuid)) == first.uuid


def test_a_paused_once_loop_whose_time_passed_is_skipped_and_logged_on_resume(store):
    """Issue 20 items 17 and 37: nothing from the pause is replayed, once loops
    included (the seed's rule for missed fires: skip and log)."""
    once = defs.create(
        dict(name="once", once_at=T0 + 600, tz="UTC", argv=["/bin/true"], cwd="/"), now=T0
    )
    defs.pause(once)
    resumed = control.resume(Loop.get_by_id(once.uuid), now=T0 + 1200)
    assert fire_due(T0 + 1200, MISSED_AFTER) == [] and LoopRun.select().count() == 0
    assert (resumed.status, resumed.end_reason) == ("ended", "missed")
    (missed,) = _events("loop.missed")
    assert missed[1]["reason"] == "paused" and missed[1]["first"] == defs.iso(T0 + 600)
    assert defs.loop_dict(resumed)["last_missed"]["why"] == "the loop was paused at its time"
    # resumed before its time, it fires at its time, not at the resume
    later = defs.create(
        dict(name="later", once_at=T0 + 600, tz="UTC", argv=["/bin/true"], cwd="/"), now=T0
    )
    defs.pause(later)
    assert control.resume(Loop.get_by_id(later.uuid), now=T0 + 60).next_fire_at == T0 + 600
    assert fire_due(T0 + 61, MISSED_AFTER) == []
    assert len(fire_due(T0 + 600.5, MISSED_AFTER)) == 1


def test_a_missed_fire_keeps_why_for_loop_ls_and_top(store):
    from orcr_core.top.model import loop_info, loop_summary

    loop = _create(cron="0 * * * *")
    down = {"reason": "asleep", "from": T0 + 60, "to": T0 + 4 * 3600}
    assert fire_due(T0 + 4 * 3600, MISSED_AFTER, down) == []
    lp = defs.loop_dict(Loop.get_by_id(loop.uuid))
    assert lp["last_missed"]["reason"] == "asleep" and lp["last_missed"]["count"] == 4
    assert lp["last_missed"]["why"] == "machine asleep 2026-05-28 20:28–2026-05-29 00:27"
    assert "missed: machine asleep 2026-05-28 20:28–2026-05-29 00:27" in loop_summary(loop_info(lp))


def test_when_a_run_ends_the_oldest_pending_run_starts(store):
    """Issue 20 item 35: FIFO, by when the run was asked for (not its due time)."""
    loop = _create()
    first = _occupy(loop)
    with db.atomic("IMMEDIATE"):
        older = runs.allocate(loop, "manual", T0 + 50, T0 + 1)
        newer = runs.allocate(loop, "manual", T0 + 10, T0 + 2)  # due earlier, asked later
        newest = runs.allocate(loop, "manual", T0 + 5, T0 + 3)
    with db.atomic("IMMEDIATE"):
        runs.set_status(LoopRun.get_by_id(first.uuid), "ok", T0 + 4, exit_code=0)
    assert [r.uuid for r in runs.take_pending(loop.uuid, T0 + 5)] == [older.uuid]
    with db.atomic("IMMEDIATE"):
        runs.set_status(LoopRun.get_by_id(older.uuid), "ok", T0 + 6, exit_code=0)
    assert [r.uuid for r in runs.take_pending(loop.uuid, T0 + 7)] == [newer.uuid]
    assert LoopRun.get_by_id(newest.uuid).status == "pending"


def test_the_loop_zone_gives_the_first_and_every_later_fire(store):
    """Issue 20 item 34: 9:00 in Paris, across the spring change (08:00Z, then 07:00Z)."""
    start = 1_774_656_000.0  # 2026-03-28T00:00:00Z
    loop = defs.create(
        dict(name="paris", cron="0 9 * * *", tz="Europe/Paris", argv=["/bin/true"], cwd="/"),
        now=start,
    )
    assert defs.iso(loop.next_fire_at) == "2026-03-28T08:00:00.000Z"
    assert len(fire_due(loop.next_fire_at + 0.5, MISSED_AFTER)) == 1
    nxt = Loop.get_by_id(loop.uuid).next_fire_at
    assert defs.iso(nxt) == "2026-03-29T07:00:00.000Z"  # CEST from the 29th
    # and after a miss, the next fire is still the zone's
    assert fire_due(nxt + 86400 + 3600, MISSED_AFTER) == []
    assert defs.iso(Loop.get_by_id(loop.uuid).next_fire_at) == "2026-03-31T07:00:00.000Z"


def test_loop_history_has_its_own_bound_agent_churn_cannot_evict_it(store, monkeypatch):
    """Issue 20 item 21: events.retention bounds the rest; each loop keeps its own
    newest loops.keep_events rows."""
    from orcr_core.store import events

    monkeypatch.setattr(events, "_LOOP_PASS_EVERY", 1)
    monkeypatch.setattr(events, "_loop_pass_at", [0])
    a, b = _create(name="a"), _create(name="b")
    with db.atomic("IMMEDIATE"):
        for i in range(30):
            events.emit("run.status", loop=a.uuid, n=i)
        for _ in range(200):  # agent churn
            events.emit("agent.status", "some-agent")
    bus = events.Bus()
    events.apply_retention(bus, keep=50, keep_per_loop=20)
    kept_a = [e.data for e in Event.select().where(Event.loop == a.uuid).order_by(Event.seq)]
    assert len(kept_a) == 20 and json.loads(kept_a[-1])["n"] == 29  # the newest 20
    assert Event.select().where(Event.loop == b.uuid).count() == 1  # loop.created stays
    assert Event.select().where(Event.loop.is_null()).count() <= 50
