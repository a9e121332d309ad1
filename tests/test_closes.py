"""Reconciliation's settling of open pane closes (``orcr_core/agents/closes.py``), on a
real store: which open ``pane.close_requested`` it records as done (``gone``), and
when. The end-to-end test (a full disk or a SIGKILL at ``before_close_applied``) is
``tests/test_close_settle.py``. Planted, one at a time: ``_gone`` by pane id alone
(a reused id keeps the intent open) -> the reuse test fails; no second periodic pass
asked for -> the wait test fails; a row's own pane not left to the monitor -> its
test fails."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from orcr_core import dirs
from orcr_core.agents import closes
from orcr_core.store import db as store_db
from orcr_core.store import events
from orcr_core.store.models import Agent, Event, db


@pytest.fixture
def store(short_tmp):
    store_db.open_store(short_tmp / "store.db")
    closes._gone_before.clear()
    yield short_tmp
    store_db.close_store()


def _row(uuid: str, status: str, pane_id: str, token: str, past: str | None = None) -> Agent:
    return Agent.create(
        uuid=uuid, path=f"c/{uuid}", name=uuid, provider="p", queue_seq=1, cwd="/",
        created_at=0.0, status=status, pane_id=pane_id, launch_token=token, past_tokens=past,
        exit_reason="killed" if status == "ended" else None,
    )  # fmt: skip


def _intent(uuid: str, pane_id: str) -> None:
    with db.atomic("IMMEDIATE"):
        events.emit("pane.close_requested", uuid, path=f"c/{uuid}", pane_id=pane_id, why="late")


def _pane(pane_id: str, token: str, instance: str | None = None):
    return SimpleNamespace(
        pane_id=pane_id, launch_token=token, instance=instance or dirs.instance_id()
    )


def _last(uuid: str) -> tuple[str, dict]:
    e = Event.select().where(Event.agent == uuid).order_by(Event.seq.desc()).first()
    return e.kind, json.loads(e.data)


def test_a_gone_panes_close_is_settled_at_once_at_start(store):
    _row("a", "ended", "%1", "t-a")
    _intent("a", "%9")
    assert closes.settle([], at_start=True) == 1
    assert _last("a") == ("pane.close_applied", {"path": "c/a", "pane_id": "%9", "gone": True})
    assert closes.settle([], at_start=True) == 0  # settled once


def test_the_periodic_pass_waits_for_its_second_look(store):
    """A close just done by the multiplexer may still be writing its own applied."""
    _row("a", "ended", "%1", "t-a")
    _intent("a", "%9")
    assert closes.settle([], at_start=False) == 0
    assert _last("a")[0] == "pane.close_requested"
    assert closes.settle([], at_start=False) == 1
    assert _last("a")[0] == "pane.close_applied"


def test_an_intent_seen_gone_once_then_present_starts_over(store):
    _row("a", "ended", "%1", "t-a")
    _intent("a", "%9")
    assert closes.settle([], at_start=False) == 0
    assert closes.settle([_pane("%9", "t-a")], at_start=False) == 0  # there after all
    assert closes.settle([], at_start=False) == 0  # gone again: a first look
    assert closes.settle([], at_start=False) == 1


def test_a_reused_pane_id_carrying_another_rows_marks_is_gone(store):
    """A restarted multiplexer hands ids out again (tmux from %0, herdr's too)."""
    _row("a", "ended", "%1", "t-a", past="t-old")
    _intent("a", "%9")
    assert closes.settle([_pane("%9", "t-other")], at_start=True) == 1
    _row("b", "ended", "%2", "t-b")
    _intent("b", "%8")
    assert closes.settle([_pane("%8", "t-b", instance="another")], at_start=True) == 1


def test_a_pane_still_carrying_the_rows_marks_is_not_gone(store):
    _row("a", "ended", "%1", "t-a", past="t-old")
    _intent("a", "%9")
    _row("b", "ended", "%2", "t-b")
    _intent("b", "%8")
    snap = [_pane("%9", "t-old"), _pane("%8", "t-b")]  # a past launch's token counts too
    assert closes.settle(snap, at_start=True) == 0
    assert _last("a")[0] == _last("b")[0] == "pane.close_requested"


def test_a_live_rows_own_pane_is_left_to_the_monitor(store):
    """The monitor ends the row as the open close meant (``panes._vanished``)."""
    _row("a", "idle", "%1", "t-a")
    _intent("a", "%1")
    assert closes.settle([], at_start=True) == 0
    _row("b", "lost", "%2", "t-b")
    _intent("b", "%7")  # another pane of a live row: a restored one rematch.lose closed
    assert closes.settle([], at_start=True) == 1
    assert _last("a")[0] == "pane.close_requested"


def test_an_applied_close_and_a_newer_intent(store):
    _row("a", "ended", "%1", "t-a")
    _intent("a", "%9")
    with db.atomic("IMMEDIATE"):
        events.emit("pane.close_applied", "a", path="c/a", pane_id="%9")
    assert closes.settle([], at_start=True) == 0
    _intent("a", "%10")  # closed again later: the newest intent is the open one
    assert closes.settle([], at_start=True) == 1
    assert _last("a")[1]["pane_id"] == "%10"
