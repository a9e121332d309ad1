"""Status changes are guarded by the old status: no lost update.

Two writers (the queue worker and a kill, the monitor and a kill) can each read
a row in the same status and decide on a change. The UPDATE names the status
it was decided from, so the second to commit changes nothing and learns so
(``transition`` returns False) instead of overwriting the first.
"""

from __future__ import annotations

import threading

import pytest

from orcr_core.agents import lifecycle
from orcr_core.store import db as store_db
from orcr_core.store.models import Agent, Event, db


@pytest.fixture
def store(short_tmp):
    store_db.open_store(short_tmp / "store.db")
    yield
    store_db.close_store()


def _row(status: str) -> Agent:
    return Agent.create(
        uuid="u1", path="r/a", name="a", provider="p", status=status, queue_seq=1, cwd="/",
        created_at=0.0,
    )  # fmt: skip


def _moves() -> list[tuple[str, str]]:
    import json

    return [
        (d["from"], d["to"])
        for d in (json.loads(e.data) for e in Event.select().order_by(Event.seq))
        if "from" in d
    ]


def test_a_stale_reader_cannot_overwrite_a_newer_status(store):
    _row("queued")
    promoter, killer = Agent.get(Agent.uuid == "u1"), Agent.get(Agent.uuid == "u1")
    with db.atomic("IMMEDIATE"):
        assert lifecycle.transition(promoter, "starting")
    with db.atomic("IMMEDIATE"):  # the kill read "queued" before the promotion committed
        assert lifecycle.transition(killer, "ended", "canceled") is False
    assert Agent.get(Agent.uuid == "u1").status == "starting"
    assert killer.status == "queued"  # the loser's object is not updated either
    assert _moves() == [("queued", "starting")]


def test_racing_writers_on_real_connections_one_wins(store):
    """Two threads, each on its own SQLite connection, read the same working row,
    then both try to move it (turn end vs kill): exactly one change happens."""
    _row("working")
    barrier = threading.Barrier(2)
    results: dict[str, bool] = {}

    def writer(to: str, reason: str | None):
        db.connect(reuse_if_open=True)
        try:
            agent = Agent.get(Agent.uuid == "u1")
            barrier.wait(10)  # both have read "working"
            with db.atomic("IMMEDIATE"):
                results[to] = lifecycle.transition(agent, to, reason)
        finally:
            db.close()

    threads = [
        threading.Thread(target=writer, args=("idle", None)),
        threading.Thread(target=writer, args=("ended", "killed")),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert sorted(results.values()) == [False, True], results
    winner = next(to for to, ok in results.items() if ok)
    assert Agent.get(Agent.uuid == "u1").status == winner
    assert _moves() == [("working", winner)]  # one change, one event
