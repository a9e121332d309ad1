"""Statuses and exit reasons are ``StrEnum``s in the public contracts (issue 34 item 5):
a writer may use the member or the word, and the wire never tells the difference."""

from __future__ import annotations

import json

import pytest

from orcr_core.agents import lifecycle
from orcr_core.contracts import AgentStatus, ExitReason
from orcr_core.server.shapes import agent_dict
from orcr_core.store import db as store_db
from orcr_core.store.models import ACTIVE, EXIT_REASONS, LIVE, STATUSES, Agent, Event
from orcr_core.top import rows


@pytest.fixture
def store(short_tmp):
    store_db.open_store(short_tmp / "store.db")
    yield
    store_db.close_store()


def test_the_tuples_are_the_words_in_their_order():
    """The store's tuples (and ``orcr top``'s) are the enums' words, plain strings, in
    the order they had as literals: messages that print them read as before."""
    assert STATUSES == ("queued", "starting", "working", "idle", "lost", "ended")
    assert LIVE == ("starting", "working", "idle")
    assert ACTIVE == ("queued", "starting", "working", "idle", "lost")
    assert EXIT_REASONS == (
        "canceled", "failed", "killed", "exited", "timeout", "lost", "gc", "done", "oom",
    )  # fmt: skip
    assert (rows.STATUSES, rows.LIVE) == (STATUSES, LIVE)
    assert all(type(w) is str for w in STATUSES + EXIT_REASONS + LIVE + ACTIVE)


def _row(uuid: str) -> Agent:
    return Agent.create(
        uuid=uuid, path=f"r/{uuid}", name=uuid, provider="p", status="queued", queue_seq=1,
        cwd="/", created_at=0.0,
    )  # fmt: skip


def _wire(uuid: str) -> tuple[str, list[str]]:
    """The row's socket JSON (in memory and as read back) and its events' data, with
    the uuid and path taken out so two agents compare."""
    row = Agent.get(Agent.uuid == uuid)
    shown = json.dumps(agent_dict(row)).replace(uuid, "U")
    data = [e.data.replace(uuid, "U") for e in Event.select().where(Event.agent == uuid)]
    return shown, data


def test_a_row_moved_with_members_is_byte_identical_to_one_moved_with_words(store, fake_clock):
    """Planted: ``AgentStatus`` as a plain ``Enum`` (not ``StrEnum``) -> fails (the
    row's status no longer equals the word, the JSON cannot encode it)."""
    # the same instants: the fake clock stands still (tests/_support/clock.py)
    words, members = _row("agent-words"), _row("agent-members")
    for to, why in (("starting", None), ("working", None), ("idle", None), ("ended", "done")):
        assert lifecycle.transition(words, to, why)
        member = AgentStatus(to)
        assert lifecycle.transition(members, member, ExitReason(why) if why else None)
        # the in-memory instance the transition updated shows the same bytes
        in_memory = json.dumps(agent_dict(members)).replace("agent-members", "U")
        assert in_memory == json.dumps(agent_dict(words)).replace("agent-words", "U")
    assert _wire("agent-members") == _wire("agent-words")
    assert json.loads(_wire("agent-members")[0])["exit_reason"] == "done"
    assert Agent.get(Agent.uuid == "agent-members").status == AgentStatus.ENDED == "ended"
    # a query written with a member (the server's handlers) finds the rows written either way
    assert Agent.select().where(Agent.status == AgentStatus.ENDED).count() == 2
    assert Agent.select().where(Agent.status != AgentStatus.ENDED).count() == 0
