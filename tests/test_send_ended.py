"""An ``agent send`` whose agent ends before its prompt is typed is settled by the end,
never left open, and never typed afterwards.

The 1-hour tmux soak (seed 2803) saw it: ``w2/idle_send_133``'s send recorded
``prompt.requested`` and went ``working``; its delivery job was cut off by a full disk
before the paste; 1.1 s later the pane's process exited and the monitor ended the row
``exited``. The monitor's visit then resumed the cut-off job (its row read before the
end), which found the row ended and returned: nothing ever closed the intent, and the
ended row kept its ``pending_prompt``. Now the end settles a pending send in its own
transaction (``lifecycle.settle_send``: ``prompt.failed`` when nothing was typed,
``prompt.applied`` unconfirmed when typing had begun), and each step of a send's
delivery checks, inside the transaction recording it, that its prompt is still
pending: an end committed first means no key is sent, and no second settle.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
from types import SimpleNamespace

import pytest

from orcr_core.agents import delivery, lifecycle, parking
from orcr_core.sdk.client import ServerError
from orcr_core.store import db as store_db
from orcr_core.store import events
from orcr_core.store.models import Agent, Event, db


@pytest.fixture
def store(short_tmp):
    store_db.open_store(short_tmp / "store.db")
    yield short_tmp
    store_db.close_store()


def _server(on_type=None):
    typed: list[str] = []

    def send_prompt(pane, text):
        typed.append(text)
        if on_type is not None:
            on_type()

    driver = SimpleNamespace(
        send_prompt=send_prompt,
        send_keys=lambda pane, keys: typed.append(repr(keys)),
        agent_status=lambda pane: "idle",
        read=lambda pane: "",
    )
    registry = SimpleNamespace(providers={})
    config = SimpleNamespace(duration=lambda key: 0.05)
    return SimpleNamespace(
        driver=driver, registry=registry, config=config, typed=typed, notify=lambda: None
    )


def _sent() -> Agent:
    """An idle agent, then its ``agent send`` as the handler commits it."""
    agent = Agent.create(
        uuid="u1", path="s/a", name="a", provider="p", queue_seq=1, cwd="/", created_at=0.0,
        status="idle", pane_id="%1", tab_id="@1", workspace_id="w", turn=1,
    )  # fmt: skip
    with db.atomic("IMMEDIATE"):
        lifecycle.update(agent, None, turn=2, pending_prompt="hello")
        events.emit("prompt.requested", agent.uuid, path=agent.path, turn=2)
        lifecycle.transition(agent, "working")
    return agent


def _end() -> None:
    """The monitor ends the row: the pane's process exited."""
    with db.atomic("IMMEDIATE"):
        lifecycle.transition(Agent.get(Agent.uuid == "u1"), "ended", "exited")


def _prompt_events() -> list[tuple[str, dict]]:
    import json

    rows = Event.select().where((Event.agent == "u1") & Event.kind.startswith("prompt."))
    return [(e.kind, json.loads(e.data or "{}")) for e in rows.order_by(Event.seq)]


def test_an_end_before_the_delivery_settles_the_send_and_nothing_is_typed(store):
    """Planted: settle_send not called on the end -> fails (no prompt.failed, the
    pending prompt kept)."""
    _sent()
    _end()
    server = _server()
    delivery.send_job(server, "u1")  # the cut-off job, resumed after the end
    assert server.typed == []
    kinds = [k for k, _ in _prompt_events()]
    assert kinds == ["prompt.requested", "prompt.failed"], kinds
    assert "ended (exited)" in _prompt_events()[1][1]["error"]
    assert Agent.get(Agent.uuid == "u1").pending_prompt is None


def test_an_end_while_the_delivery_runs_stops_it_before_a_key(store, monkeypatch):
    """The end commits after the job read the row working, before its first step.
    Planted: the send's steps recorded without the pending check (still=None) -> fails
    (the prompt typed into the ended agent's pane, and settled twice)."""
    _sent()

    def unpark(server, agent, why):
        _end()
        return agent

    monkeypatch.setattr(parking, "unpark", unpark)
    server = _server()
    delivery.send_job(server, "u1")
    assert server.typed == []
    kinds = [k for k, _ in _prompt_events()]
    assert kinds == ["prompt.requested", "prompt.failed"], kinds


def test_an_end_after_the_typing_began_is_one_unconfirmed_applied(store):
    """Typing had begun when the program ended: the end records ``prompt.applied``
    unconfirmed, and the job, finishing, adds no second settle.
    Planted: send_job's prompt.applied without the _settled check -> fails."""
    _sent()
    server = _server(on_type=_end)
    delivery.send_job(server, "u1")
    assert server.typed == ["hello"]  # once
    settles = [(k, d) for k, d in _prompt_events() if k in ("prompt.applied", "prompt.failed")]
    assert len(settles) == 1, settles
    assert settles[0][0] == "prompt.applied" and settles[0][1]["confirmed"] is False, settles
    assert settles[0][1]["ended"] == "exited"


def _pending_prompt(live, uuid: str):
    conn = sqlite3.connect(live.path / "store.db")
    try:
        row = conn.execute("SELECT pending_prompt FROM agent WHERE uuid = ?", (uuid,)).fetchone()
    finally:
        conn.close()
    return row[0]


@pytest.mark.parametrize("live", ["tmux"], indirect=True)
def test_a_send_whose_program_exits_before_its_delivery_is_settled(live):
    """Real server and tmux: the server is SIGKILLed as the send's delivery begins
    (``before_prompt``: ``prompt.requested`` committed, nothing typed), the agent's
    program exits meanwhile, and the restarted server (its resumed delivery cut off by
    a full disk, as the soak's was) ends the row ``exited``. Its send is settled
    ``prompt.failed``, nothing was typed, and no prompt stays pending.
    Planted: settle_send not called on the end -> fails (the intent left open)."""
    live.start_server(extra_env={"ORCR_FAULT": "before_prompt"})
    uuid = live.run("agent", "run", "-p", "echo", "--path", "s/exits", check=True).stdout.split()[1]
    live.run("agent", "wait", "s/exits", "--timeout", "30s", check=True)
    pane = live.get("s/exits")["pane_id"]
    try:
        with live.sdk() as o:
            o.send("s/exits", "never typed")  # committed before its delivery starts
    except ServerError:
        pass  # the reply lost: the delivery's fault killed the server first
    assert live.proc.wait(30) == -signal.SIGKILL, live.server_log()
    pid = subprocess.run(
        ["tmux", "-S", str(live.mux.socket), "display", "-p", "-t", pane, "#{pane_pid}"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    os.kill(int(pid), signal.SIGKILL)  # the agent's program exits
    live.start_server(extra_env={"ORCR_FAULT": "disk_full@before_prompt"})
    row = live.ended("s/exits")
    assert row["exit_reason"] == "exited", row
    kinds = [e["kind"] for e in live.events(uuid) if e["kind"].startswith("prompt.")]
    assert kinds == ["prompt.requested", "prompt.failed"], kinds
    assert _pending_prompt(live, uuid) is None
    echo = live.path / "agents" / uuid / "echo.jsonl"
    assert "never typed" not in (echo.read_text() if echo.exists() else "")


def test_the_previous_sends_late_settle_does_not_settle_the_next(store):
    """The previous send's job writes its ``prompt.applied`` after the next send was
    requested (its turn ended, the client sent again, the job was still confirming):
    that is not the next prompt's settle. test_delivery saw it 1 run in 4: the next
    send's job took it for its own, returned without typing, and left the prompt
    pending for good. Planted: _settled counting any settle before the next request
    (no ``request`` match) -> fails (nothing typed, the prompt still pending)."""
    agent = _sent()  # turn 2, "hello"
    first = delivery._last_request(agent)
    with db.atomic("IMMEDIATE"):  # turn 2 ends; the client sends turn 3 at once
        lifecycle.transition(agent, "idle")
        lifecycle.update(agent, None, turn=3, pending_prompt="again")
        events.emit("prompt.requested", agent.uuid, path=agent.path, turn=3)
        lifecycle.transition(agent, "working")
    with db.atomic("IMMEDIATE"):  # turn 2's job, confirming, settles its own now
        events.emit("prompt.applied", "u1", path="s/a", turn=2, confirmed=True, request=first)
    server = _server()
    delivery.send_job(server, "u1")
    assert server.typed == ["again"]
    settles = [d for k, d in _prompt_events() if k == "prompt.applied"]
    assert [d["turn"] for d in settles] == [2, 3], settles
    assert settles[1]["request"] == delivery._last_request(agent) != first
    assert Agent.get(Agent.uuid == "u1").pending_prompt is None
