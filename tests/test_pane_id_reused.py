"""A pane id handed out again is never held by two live rows (soak seed 2812, herdr).

A multiplexer SIGKILLed numbers its panes afresh when it comes back: tmux's ``%N``,
herdr's ``wN:pM`` when it died before saving. A row still ``working`` on an old id
the monitor has not yet seen gone, and a new start given that same id, would both
hold it, and whatever orcr addresses to the old row by pane id (the press that
confirms its prompt, a close) would reach the new agent. The start that records the
new pane moves every other live holder of its id to ``lost`` in the same transaction
(``lifecycle.release_reused``); the monitor then resolves it as any lost row.

Planted: the pipeline without ``release_reused`` -> the end-to-end test fails (the old
row went lost at seq 27, after the new pane was recorded at 19); ``release_reused``
matching any pane id -> the unit test fails (3 released: another pane's row too).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from orcr_core.agents import lifecycle
from orcr_core.kit.testing import until
from orcr_core.store import db as store_db
from orcr_core.store.models import Agent, db

sys.path.insert(0, str(Path(__file__).parent / "plugins"))
import orcr_test_driver as td  # noqa: E402

# the monitor looks rarely: the new start comes before it sees the old pane gone
CONFIG = (
    '[driver]\nname = "test"\n[timings]\npoll_every = "30s"\nreconcile_every = "60s"\n'
    'prompt_confirm = "200ms"\n'
)


@pytest.fixture
def store(short_tmp):
    store_db.open_store(short_tmp / "store.db")
    yield short_tmp
    store_db.close_store()


def _row(uuid: str, status: str, pane_id: str | None) -> Agent:
    return Agent.create(
        uuid=uuid, path=f"p/{uuid}", name=uuid, provider="p", queue_seq=1, cwd="/",
        created_at=0.0, status=status, pane_id=pane_id, workspace_id="w",
    )  # fmt: skip


def test_release_reused_loses_only_live_holders_of_that_id(store):
    new = _row("new", "starting", None)
    _row("working", "working", "w1:p1")
    _row("idle", "idle", "w1:p1")
    _row("lost", "lost", "w1:p1")
    _row("other", "working", "w1:p2")
    with db.atomic("IMMEDIATE"):
        assert lifecycle.release_reused(new, "w1:p1") == 2
    status = {a.uuid: a.status for a in Agent.select()}
    assert status == {
        "new": "starting",
        "working": "lost",
        "idle": "lost",
        "lost": "lost",
        "other": "working",
    }


def test_a_start_given_a_live_rows_pane_id_loses_that_row_first(orcr_home):
    orcr_home.config(CONFIG)
    orcr_home.start_server()
    with orcr_home.sdk() as o:
        old = o.run("x", provider="testp", path="f/old", cwd="/")
        until(lambda: o.get("f/old")["status"] == "working", 30, "f/old working")
        pane = o.get("f/old")["pane_id"]
        # the multiplexer was killed and came back empty, numbering panes afresh
        with td._state() as s:
            s["panes"].pop(pane)
            s["n"] = 0
        new = o.run("x", provider="testp", path="f/new", cwd="/")
        until(lambda: o.get("f/new")["status"] == "working", 30, "f/new working")
        assert o.get("f/new")["pane_id"] == pane  # the id was handed out again
    events = orcr_home.events()
    applied = next(
        e["seq"] for e in events if e["kind"] == "pane.start_applied" and e["agent"] == new["uuid"]
    )
    lost = [
        e
        for e in events
        if e["agent"] == old["uuid"] and e["kind"] == "agent.status" and e["data"]["to"] == "lost"
    ]
    assert lost and lost[0]["seq"] < applied, (lost, applied)
    assert "gave the pane's id to a new pane" in lost[0]["data"]["why"]
