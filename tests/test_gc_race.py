"""Idle GC never ends an agent that ``agent send`` made working meanwhile.

The 1-hour chaos soak (seed 2701) saw ``w0/idle_send_14`` ended ``gc`` *from working*:
the monitor read it idle past ``gc_after``, ``agent send`` moved it to working and began
typing, then the monitor's end closed its pane and ended it mid-delivery. An end now
names the fields it was decided on, re-read under the agent's ending lock: if the row
has moved past them, nothing is ended. The same holds for a turn's timeout.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from orcr_core.agents import lifecycle, monitor
from orcr_core.store import db as store_db
from orcr_core.store.models import Agent, db


class _Config:
    def duration(self, key: str) -> float:
        return {"timings.gc_after": 4.0, "timings.stop_grace": 1.0}.get(key, 3600.0)


@pytest.fixture
def store(short_tmp):
    store_db.open_store(short_tmp / "store.db")
    yield short_tmp
    store_db.close_store()


def _server(tmp):
    closed: list[str] = []
    driver = SimpleNamespace(
        close=lambda pane: closed.append(pane.pane_id), pane_pid=lambda p: None
    )
    server = SimpleNamespace(
        agents_dir=tmp, config=_Config(), driver=driver, notify=lambda **kw: None, closed=closed
    )
    return server


def _row(**kw) -> Agent:
    fields = dict(uuid="u1", path="r/a", name="a", provider="p", queue_seq=1, cwd="/",
                  created_at=0.0, pane_id="%1", tab_id="@1", workspace_id="w")  # fmt: skip
    return Agent.create(**dict(fields, **kw))


def test_gc_decided_on_an_idle_read_spares_an_agent_a_send_made_working(store):
    _row(status="idle", idle_since=100.0)
    stale = Agent.get(Agent.uuid == "u1")  # what the monitor read: idle since 100
    with db.atomic("IMMEDIATE"):  # agent send: idle -> working, its prompt being typed
        assert lifecycle.transition(Agent.get(Agent.uuid == "u1"), "working")
    server = _server(store)
    monitor._agent(server, stale, now=1000.0)  # idle 900 s > gc_after, by the stale read
    row = Agent.get(Agent.uuid == "u1")
    assert (row.status, row.exit_reason, server.closed) == ("working", None, [])


def test_a_timeout_decided_on_an_old_turn_spares_the_next_turn(store):
    _row(status="working", timeout=10.0, turn_started_at=100.0)
    stale = Agent.get(Agent.uuid == "u1")
    with db.atomic("IMMEDIATE"):  # that turn ended and a new one began since the read
        agent = Agent.get(Agent.uuid == "u1")
        assert lifecycle.transition(agent, "idle")
        assert lifecycle.transition(agent, "working")
    server = _server(store)
    monitor._agent(server, stale, now=1000.0)
    row = Agent.get(Agent.uuid == "u1")
    assert (row.status, server.closed) == ("working", [])


def test_gc_still_ends_an_agent_idle_past_gc_after(store):
    _row(status="idle", idle_since=100.0)
    server = _server(store)
    monitor._agent(server, Agent.get(Agent.uuid == "u1"), now=1000.0)
    row = Agent.get(Agent.uuid == "u1")
    assert (row.status, row.exit_reason, server.closed) == ("ended", "gc", ["%1"])


def test_a_send_during_gcs_close_waits_for_it_and_is_refused(store):
    """The window the first test leaves: GC re-read the row idle and began closing the
    pane; a send arriving then must not move the agent to working under the close
    (the CI soak's seed 1046942382 saw ``ended gc while working``). It waits for the
    agent's lock and finds the agent ended."""
    import threading

    from orcr_core.agents import delivery
    from orcr_core.store.models import Event

    _row(status="idle", idle_since=100.0)
    server = _server(store)
    closing, release = threading.Event(), threading.Event()

    def slow_close(pane):
        closing.set()
        assert release.wait(10)
        server.closed.append(pane.pane_id)

    server.driver.close = slow_close
    server.start_pipeline = lambda *a, **kw: None
    gc = threading.Thread(
        target=monitor._agent, args=(server, Agent.get(Agent.uuid == "u1"), 1000.0)
    )
    gc.start()
    assert closing.wait(10)
    sent: list[bool] = []
    send = threading.Thread(
        target=lambda: sent.append(
            delivery.send_prompt(server, Agent.get(Agent.uuid == "u1"), "hi", None)
        )
    )
    send.start()
    send.join(0.5)
    assert send.is_alive(), "the send did not wait for GC's close"
    release.set()
    gc.join(10)
    send.join(10)
    row = Agent.get(Agent.uuid == "u1")
    assert (row.status, row.exit_reason, row.turn, sent) == ("ended", "gc", 0, [False])
    assert not Event.select().where(Event.kind == "prompt.requested").exists()
