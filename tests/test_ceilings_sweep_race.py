"""The reconciler's ceilings sweep asks the store whether a group's agent is live when
the backend finds the group (``reconcile.LiveRows``), not from a set read before the
listing: an agent admitted and started in between had its new group swept, with the
agent in it (a loaded run of test_ceilings_crash: the next agent ``exited`` at once).
Planted: ``_sweep`` passing the set of live uuids read first -> the group of the agent
admitted during the listing is removed -> fails."""

from __future__ import annotations

import pytest

from orcr_core.agents import reconcile
from orcr_core.ceilings import step as ceilings_step
from orcr_core.store import db as store_db
from orcr_core.store.models import Agent


@pytest.fixture
def store(short_tmp):
    store_db.open_store(short_tmp / "store.db")
    yield short_tmp
    store_db.close_store()


def _agent(uuid: str, status: str) -> None:
    Agent.create(
        uuid=uuid, path=f"w/{uuid}", name=uuid, provider="p", queue_seq=1, cwd="/",
        created_at=0.0, status=status, launch_token=f"t-{uuid}",
    )  # fmt: skip


class _Backend:
    """A backend whose listing finds the groups of ``groups``; the first listing
    admits ``late`` (its row committed between the sweep's start and its check)."""

    def __init__(self, groups: list[str], late: str) -> None:
        self.groups, self.late, self.removed = groups, late, []

    def sweep(self, live) -> list[str]:
        _agent(self.late, "starting")  # admitted and started while the sweep runs
        for uuid in self.groups:
            if uuid not in live:
                self.removed.append(uuid)
        return self.removed


def test_a_group_made_while_the_sweep_runs_is_kept(store, monkeypatch):
    _agent("gone", "ended")
    _agent("kept", "idle")
    backend = _Backend(["gone", "kept", "late"], late="late")
    monkeypatch.setattr(
        ceilings_step.ceilings, "current", lambda: type("C", (), {"backend": backend})()
    )
    reconcile._sweep()
    assert backend.removed == ["gone"]
