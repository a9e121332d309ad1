"""Which agent a request names (``orcr_core/server/targets.py``), on a real store: a
uuid, else a path, where the active row comes before any ended one and the newest
ended one before older ones. Planted: the path's order ``status = 'ended' DESC`` (an
ended row first) -> the active-row test fails; ``id ASC`` -> the newest-ended test
fails."""

from __future__ import annotations

import pytest

from orcr_core.protocol import ProtocolError
from orcr_core.server.targets import resolve
from orcr_core.store import db as store_db
from orcr_core.store.models import Agent


@pytest.fixture
def store(short_tmp):
    store_db.open_store(short_tmp / "store.db")
    yield short_tmp
    store_db.close_store()


def _row(uuid: str, path: str, status: str) -> Agent:
    return Agent.create(
        uuid=uuid, path=path, name=path.rsplit("/", 1)[-1], provider="p", queue_seq=1,
        cwd="/", created_at=0.0, status=status, launch_token=f"t-{uuid}",
        exit_reason="killed" if status == "ended" else None,
    )  # fmt: skip


def test_a_path_names_its_active_row_before_any_ended_one(store):
    _row("u1", "x/a", "idle")  # resumed: its row is older than the ended ones
    _row("u2", "x/a", "ended")
    _row("u3", "x/a", "ended")
    assert resolve("x/a").uuid == "u1"
    assert resolve("/x/a").uuid == "u1"  # named from the top inside a scope


def test_a_path_with_only_ended_rows_names_the_newest(store):
    _row("u1", "x/b", "ended")
    _row("u2", "x/b", "ended")
    assert resolve("x/b").uuid == "u2"
    assert resolve("u1").uuid == "u1"  # a uuid names its own row


def test_an_unknown_target_is_not_found(store):
    with pytest.raises(ProtocolError) as err:
        resolve("x/none")
    assert err.value.code == "not_found"
