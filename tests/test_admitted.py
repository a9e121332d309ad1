"""After an admission commits (``handlers.admitted``; one agent or a pipelined group):
the watchers are woken, and the queue worker only while a slot is free. Planted: the
check dropped (always ``queue=True``) -> the at-the-cap test fails; ``<=`` for ``<``
-> it fails too; a failing count raised -> the store-error test fails."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from peewee import OperationalError

from orcr_core import config as config_mod
from orcr_core.agents import queue
from orcr_core.server import handlers
from orcr_core.store import db as store_db
from orcr_core.store.models import Agent


@pytest.fixture
def store(short_tmp):
    store_db.open_store(short_tmp / "store.db")
    yield short_tmp
    store_db.close_store()


def _server(store, cap: int) -> tuple[SimpleNamespace, list[bool]]:
    woke: list[bool] = []
    path = store / "config.toml"
    path.write_text(f"[concurrency]\nmax = {cap}\n")
    server = SimpleNamespace(config=config_mod.load(path), notify=lambda queue: woke.append(queue))
    return server, woke


def _live(n: int) -> None:
    for i in range(n):
        Agent.create(
            uuid=f"u{i}", path=f"w/a{i}", name=f"a{i}", provider="p", queue_seq=i + 1,
            cwd="/", created_at=0.0, status="working", launch_token=f"t{i}",
        )  # fmt: skip


def test_the_queue_worker_is_woken_only_while_a_slot_is_free(store):
    server, woke = _server(store, cap=2)
    _live(1)
    handlers.admitted(server)
    Agent.create(
        uuid="u9", path="w/b", name="b", provider="p", queue_seq=9, cwd="/",
        created_at=0.0, status="idle", launch_token="t9",
    )  # fmt: skip
    handlers.admitted(server)  # 2 live, cap 2: nothing can start
    assert woke == [True, False]


def test_a_failing_count_still_wakes_it_and_raises_nothing(store, monkeypatch):
    server, woke = _server(store, cap=2)

    def broken():
        raise OperationalError("disk I/O error")

    monkeypatch.setattr(queue, "live_counts", broken)
    handlers.admitted(server)  # the admission committed: its reply must stand
    assert woke == [True]
