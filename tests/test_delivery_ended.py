"""A first prompt is never typed into an agent that ended while it was being delivered.

The 40-minute chaos soak on herdr (seed 2702) saw it: a clock jump made the
stuck-start guard end a starting agent while its pipeline waited for the TUI's
input, and the pipeline went on to record and type the first prompt into the pane
being closed. Each step of a first prompt's delivery now checks, inside the
transaction that records its intent, that the row is still starting (and not being
killed): an end committed at any moment before a key is sent stops the delivery.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from orcr_core.agents import delivery, lifecycle
from orcr_core.agents.dialogs import Canceled
from orcr_core.store import db as store_db
from orcr_core.store.models import Agent, Event, db


@pytest.fixture
def store(short_tmp):
    store_db.open_store(short_tmp / "store.db")
    yield short_tmp
    store_db.close_store()


def _server():
    typed: list[str] = []
    driver = SimpleNamespace(
        send_prompt=lambda pane, text: typed.append(text),
        send_keys=lambda pane, keys: typed.append(repr(keys)),
        agent_status=lambda pane: "idle",
        read=lambda pane: "",
    )
    registry = SimpleNamespace(providers={})
    config = SimpleNamespace(duration=lambda key: 0.05)
    return SimpleNamespace(driver=driver, registry=registry, config=config, typed=typed)


def _starting() -> Agent:
    return Agent.create(
        uuid="u1", path="r/a", name="a", provider="p", queue_seq=1, cwd="/", created_at=0.0,
        status="starting", pane_id="%1", tab_id="@1", workspace_id="w",
    )  # fmt: skip


def _end(how: str):
    """What the stuck-start guard (or a kill) commits while the pipeline runs."""

    def ready() -> bool:
        with db.atomic("IMMEDIATE"):
            row = Agent.get(Agent.uuid == "u1")
            if how == "guard":
                lifecycle.transition(row, "ended", "failed", error="stuck-start guard")
            else:
                lifecycle.update(row, None, cancel_requested=True)
        return True  # the TUI's input is ready: its own check came before the end

    return ready


@pytest.mark.parametrize("how", ["guard", "kill"])
def test_an_end_after_the_input_is_ready_stops_the_first_prompt(store, how):
    agent = _starting()
    server = _server()
    with pytest.raises(Canceled):
        delivery.first_prompt(server, agent, "hello", _end(how))
    assert server.typed == []
    kinds = [e.kind for e in Event.select().where(Event.agent == "u1")]
    assert not [k for k in kinds if k.startswith("prompt.")], kinds


def test_a_starting_agent_still_gets_its_first_prompt(store):
    agent = _starting()
    server = _server()
    delivery.first_prompt(server, agent, "hello", lambda: True)
    assert server.typed[0] == "hello"
