"""Issue 20 item 33b: ``orcr top`` shows agents that ended before it started (``e``,
bounded), so ``r`` has a row to resume."""

from __future__ import annotations

import asyncio

import pytest
from top_pilot import connected, row, wait_for

from orcr_core.sdk.client import ServerError
from orcr_core.top.app import ConfirmScreen
from orcr_core.top.ended import ENDED_SHOWN


@pytest.mark.parametrize("live", ["tmux"], indirect=True)
def test_e_shows_recently_ended_agents_and_r_can_resume_one(live):
    live.start_server()
    with live.sdk() as o:
        o.run(provider="command", argv=["sh", "-c", "exit 0"], path="old/x", cwd="/")
        live.ended("old/x")
        assert live.get("old/x")["exit_reason"] == "exited"
        with pytest.raises(ServerError):  # the list is bounded
            o.client.call("agent.list", ended=ENDED_SHOWN * 100)

    async def main():
        async with connected(live.socket) as (app, pilot):
            assert row(app, "old/x") is None  # the snapshot holds active agents only
            await pilot.press("e")
            await wait_for(pilot, lambda: row(app, "old/x") is not None, "old/x shown")
            assert row(app, "old/x").status == "ended"
            assert app.select("old/x")
            await pilot.press("r")
            assert isinstance(app.screen, ConfirmScreen)  # resumable: asks first
            await pilot.press("n")
            await pilot.press("e")
            await wait_for(pilot, lambda: row(app, "old/x") is None, "old/x hidden again")

    asyncio.run(main())
