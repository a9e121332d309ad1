"""The park clock restarts when an un-parked pane is back, not when the move began.

``unparked_at`` was taken before the un-park's transaction waited for the store's
write lock, so under load (another writer holding it) the clock started earlier than
the ``pane.moved`` event that says the pane is back, and the agent was parked again
before ``park_after`` had passed since then (test_parking.py's
``test_attach_unparks_and_the_clock_restarts`` failed that way on a loaded machine).
Later it failed by 2 ms: the event's ``ts`` was read a moment after the clock's.
"""

from __future__ import annotations

import sqlite3
import threading
import time

import pytest

from orcr_core.agents import parking
from orcr_core.contracts import PaneRef
from orcr_core.store import db as store_db
from orcr_core.store.models import Agent, Event


@pytest.fixture
def store(short_tmp):
    store_db.open_store(short_tmp / "store.db")
    yield short_tmp / "store.db"
    store_db.close_store()


def test_unparked_at_is_when_the_pane_came_back_even_behind_a_busy_store(store):
    agent = Agent.create(
        uuid="u1", path="r/a", name="a", provider="p", status="idle", queue_seq=1, cwd="/",
        created_at=0.0, idle_since=1.0, parked_at=2.0, pane_id="%1", tab_id="@1",
        workspace_id="$1",
    )  # fmt: skip
    held = threading.Event()

    def writer():  # another writer holds the store's write lock for a while
        conn = sqlite3.connect(store, timeout=30)
        conn.execute("BEGIN IMMEDIATE")
        held.set()
        time.sleep(0.6)
        conn.rollback()
        conn.close()

    t = threading.Thread(target=writer)
    t.start()
    held.wait(10)
    parking._applied(agent, PaneRef("$2", "@2", "%1"), parked=False, to="workspace r")
    t.join()
    row = Agent.get_by_id(agent.id)
    moved = Event.select().where(Event.kind == "pane.moved").get()
    assert row.parked_at is None
    # the very instant: an event written a moment after the clock started (2 ms under load)
    # let a re-park come that much before park_after had passed since the event
    assert moved.ts == row.unparked_at, (moved.ts, row.unparked_at)
