"""orcr top end to end with the stalled flag, ``r`` (resume) and the header's
held-back reasons, drift counters and multiplexer health: Textual's Pilot
against a real server (real tmux and echo agents where a pane is needed)."""

from __future__ import annotations

import asyncio
import json
import subprocess

import pytest
from top_pilot import SIZE, connected, row, status_of, wait_for

from orcr_core.agents import resume
from orcr_core.top import model
from orcr_core.top.app import ConfirmScreen, TopApp


def _get(home, path: str) -> dict:
    with home.sdk() as o:
        return o.get(path)


def _line(app: TopApp, path: str) -> str:
    return app.table.line_text(app.table.keys.index(row(app, path).uuid))


def test_top_knows_which_ends_resume_can_take():
    assert model.RESUMABLE_ENDS == resume.RESUMABLE_ENDS

    def why(status, reason=None):
        return model.Row("u", "a/b", "echo", status, exit_reason=reason).not_resumable()

    assert why("lost") is None and why("ended", "lost") is None and why("ended", "exited") is None
    assert why("ended", "killed") == (
        "a/b is ended (killed); r resumes a lost agent, or one that ended lost or exited"
    )
    assert why("working").startswith("a/b is working;") and why("queued")


@pytest.mark.parametrize("live", ["tmux"], indirect=True)
def test_stalled_column_across_a_restart_then_r_resumes_a_lost_agent(live):
    live.config(live.mux.config() + '[timings]\npoll_every = "50ms"\nstall_after = "1s"\n')
    live.start_server()
    o = live.sdk().__enter__()

    async def main():
        async with connected(live.socket) as (app, pilot):
            o.run("[sleep 120] slow", provider="echo", path="t/slow", cwd="/")
            o.run("quick", provider="echo", path="t/done", cwd="/")
            await wait_for(pilot, lambda: status_of(app, "t/done") == "idle", "t/done idle")

            # the stalled flag arrives as an event: the STALLED column and the header
            await wait_for(pilot, lambda: row(app, "t/slow").stalled, "t/slow stalled")
            cells = _line(app, "t/slow").split()
            assert cells[:3] == ["t/slow", "echo", "working"] and "stalled" in cells
            assert "stalled" not in _line(app, "t/done").split()
            assert "stalled 1" in app.header_text()
            # the same model, one frame for scripts
            frame = json.loads(live.run("top", "--once", "--json", check=True).stdout)
            flags = {a["path"]: a["stalled"] for g in frame["groups"] for a in g["agents"]}
            assert flags == {"t/slow": True, "t/done": False} and frame["header"]["stalled"] == 1

            # r on an agent that is not lost says why and asks nothing
            assert app.select("t/done")
            await pilot.press("r")
            assert not isinstance(app.screen, ConfirmScreen)
            assert app.notices[-1].startswith("t/done is idle; r resumes a lost agent")

            # a server restart: the new snapshot carries the flag (the row is rebuilt)
            first = app.model.snapshot_seq
            o.close()
            live.kill_server()
            await wait_for(pilot, lambda: not app.connected, "the stream down")
            live.start_server()
            await wait_for(pilot, lambda: app.connected, "reconnected")
            assert app.model.snapshot_seq > first
            assert row(app, "t/slow").stalled and "stalled" in _line(app, "t/slow").split()
            assert "stalled 1" in app.header_text()

            # the multiplexer dies under both: they end lost, the drift counter says so
            subprocess.run(["tmux", "-S", str(live.mux.socket), "kill-server"], check=True)
            for path in ("t/slow", "t/done"):
                await wait_for(pilot, lambda p=path: status_of(app, p) == "ended", f"{path} ended")
                assert row(app, path).exit_reason == "lost"
            assert not row(app, "t/slow").stalled  # leaving working cleared the flag
            assert "stalled" not in _line(app, "t/slow").split()
            await wait_for(pilot, lambda: "drift lost 2 " in app.header_text(), "drift lost 2")

            # r on the lost agent: a confirmation naming it; n keeps it ended
            assert app.select("t/done")
            await pilot.press("r")
            assert isinstance(app.screen, ConfirmScreen)
            assert app.screen.question == "Resume t/done (ended (lost), echo)?"
            await pilot.press("n")
            assert not isinstance(app.screen, ConfirmScreen)
            assert _get(live, "t/done")["status"] == "ended"
            # y resumes it: queued again, then idle in a new pane, same uuid
            uuid = row(app, "t/done").uuid
            await pilot.press("r", "y")
            await wait_for(pilot, lambda: status_of(app, "t/done") == "idle", "t/done resumed")
            assert row(app, "t/done").uuid == uuid and _get(live, "t/done")["uuid"] == uuid
            statuses = [e["data"] for e in live.events(uuid) if e["kind"] == "agent.status"]
            requeued = [d for d in statuses if d["to"] == "queued" and d.get("resume")]
            assert len(requeued) == 1 and requeued[0]["from"] == "ended", statuses
            # resuming it again is refused by top itself: it is idle now
            await pilot.press("r")
            assert not isinstance(app.screen, ConfirmScreen)
            assert app.notices[-1].startswith("t/done is idle")

            await pilot.press("question_mark")
            assert "r        resume the selected agent" in str(
                app.screen.query_one("Static").render()
            )
            await pilot.press("escape")
            from textual.widgets._footer import FooterKey

            footer = {(k.key, k.description) for k in app.query(FooterKey)}
            assert ("r", "Resume") in footer
            assert app.model.duplicates == 0

    try:
        asyncio.run(main())
    finally:
        o.close()


def test_header_shows_held_back_reasons_drift_and_multiplexer_health(orcr_home):
    orcr_home.config(
        '[driver]\nname = "test"\n[timings]\npoll_every = "50ms"\n'
        '[concurrency]\nmin_free_memory = "100000GiB"\n'
    )
    orcr_home.start_server()
    o = orcr_home.sdk().__enter__()

    async def main():
        async with connected(orcr_home.socket) as (app, pilot):
            o.run("x", provider="testp", path="m/held", cwd="/")
            await wait_for(pilot, lambda: status_of(app, "m/held") == "queued", "m/held queued")
            await wait_for(pilot, lambda: "held back: memory" in app.header_text(), "held back")
            text = app.header_text()
            assert "queue 1" in text and "min_free_memory needs 100000.0 GiB" in text
            assert "drift lost 0 repaired 0 orphan panes 0 unmarked 0" in text
            assert "test ok" in text

    try:
        asyncio.run(main())
    finally:
        o.close()
    frame = json.loads(orcr_home.run("top", "--once", "--json", check=True).stdout)
    assert frame["header"]["held_back"].startswith("memory")


def test_header_shows_the_multiplexer_down(orcr_home, short_tmp):
    orcr_home.config(
        f'[driver]\nname = "tmux"\n[tmux]\nbinary = "{short_tmp}/no-such-tmux"\n'
        f'socket = "{short_tmp}/t.sock"\n[timings]\npoll_every = "50ms"\n'
    )
    orcr_home.start_server()

    async def main():
        app = TopApp(orcr_home.socket)
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: "DOWN" in app.header_text(), "the multiplexer down")
            assert "no-such-tmux" in app.header_text()

    asyncio.run(main())
