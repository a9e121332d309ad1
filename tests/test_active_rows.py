"""The monitor's re-read of the active rows after a write (orcr_core/agents/active_rows.py):
only the rows whose revision moved are made again, whoever wrote them.

Planted: the store's ``agent_rev`` trigger left out of its migration ->
test_a_row_another_connection_updates_is_read_again fails (a raw UPDATE by another
process is never seen); the copy comparison removed ->
test_an_object_changed_in_memory_is_made_again fails."""

from __future__ import annotations

import sqlite3

import pytest

from orcr_core.agents.active_rows import ActiveRows
from orcr_core.agents.monitor import MONITORED
from orcr_core.store import db as store_db
from orcr_core.store.models import Agent


@pytest.fixture
def store(short_tmp):
    store_db.open_store(short_tmp / "store.db")
    yield short_tmp / "store.db"
    store_db.close_store()


def _row(uuid: str, status: str = "idle") -> Agent:
    return Agent.create(
        uuid=uuid, path=f"r/{uuid}", name=uuid, provider="p", queue_seq=1, cwd="/",
        created_at=0.0, status=status,
    )  # fmt: skip


def _read(rows: ActiveRows, old: dict) -> tuple[dict, list[str]]:
    sql, params, fields = Agent.compiled(
        "monitored", lambda: Agent.select().where(Agent.status.in_(MONITORED))
    )
    got, changed = rows.read(sql, params, fields, old)
    return got, [a.uuid for a in changed]


def test_only_the_rows_that_moved_are_made_again(store):
    for name in ("a", "b", "c"):
        _row(name)
    _row("q", status="queued")
    rows = ActiveRows()
    first, changed = _read(rows, {})
    assert list(first) == ["a", "b", "c"] and changed == ["a", "b", "c"]
    again, changed = _read(rows, first)
    assert changed == [] and all(again[u] is first[u] for u in first)
    Agent.update_where({"turn": 3}, first["b"].id)  # orcr's own compiled UPDATE
    third, changed = _read(rows, again)
    assert changed == ["b"] and third["b"].turn == 3 and third["a"] is first["a"]
    assert list(third) == ["a", "b", "c"]  # the store's order, kept


def test_a_row_another_connection_updates_is_read_again(store):
    _row("a")
    _row("b")
    rows = ActiveRows()
    first, _ = _read(rows, {})
    other = sqlite3.connect(store)
    with other:
        other.execute("UPDATE agent SET turn = 7 WHERE uuid = 'a'")  # raw SQL, elsewhere
    other.close()
    second, changed = _read(rows, first)
    assert changed == ["a"] and second["a"].turn == 7 and second["b"] is first["b"]


def test_an_object_changed_in_memory_is_made_again(store):
    _row("a")
    rows = ActiveRows()
    first, _ = _read(rows, {})
    first["a"].status = "working"  # as a transaction that rolled back would leave it
    second, changed = _read(rows, first)
    assert changed == ["a"] and second["a"].status == "idle"


def test_a_row_that_ended_is_gone(store):
    _row("a")
    _row("b")
    rows = ActiveRows()
    first, _ = _read(rows, {})
    Agent.update_where({"status": "ended", "exit_reason": "killed"}, first["a"].id)
    second, changed = _read(rows, first)
    assert list(second) == ["b"] and changed == []
    rows.drop("a")
