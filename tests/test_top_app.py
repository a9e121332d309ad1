"""The orcr top screen, driven headlessly with Textual's Pilot against a real server."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from top_pilot import SIZE, connected, row, status_of, wait_for

from orcr_core.top.app import AnswerScreen, ConfirmScreen, HelpScreen, PromptScreen, TopApp


def shown(app: TopApp) -> list[str]:
    """The table's rows as the screen lists them: group keys and agent paths."""
    return [k if k.startswith("g:") else app.model.rows[k].path for k in app.table.keys]


def run(coro):
    asyncio.run(coro)


@pytest.mark.parametrize("live", ["tmux"], indirect=True)
def test_rows_live_prompt_answer_kill_filter_sort_attach(live):
    live.start_server()
    o = live.sdk().__enter__()

    async def main():
        async with connected(live.socket) as (app, pilot):
            # the turn lasts 3s: long enough to see it working on a loaded machine
            o.run("[sleep 3] first answer\nmore", provider="echo", path="demo/a", cwd="/")
            # rows appear and change status as events arrive
            await wait_for(pilot, lambda: status_of(app, "demo/a") == "working", "demo/a working")
            await wait_for(pilot, lambda: status_of(app, "demo/a") == "idle", "demo/a idle")
            await wait_for(pilot, lambda: row(app, "demo/a").answer == "first answer", "answer")
            assert shown(app) == ["g:demo", "demo/a"]
            line = app.table.line_text(app.table.keys.index(row(app, "demo/a").uuid))
            assert line.split()[:3] == ["demo/a", "echo", "idle"] and "first answer" in line
            assert "live 1/" in app.header_text() and "tmux ok" in app.header_text()

            # p: a prompt to the idle agent
            assert app.select("demo/a")
            await pilot.press("p")
            assert isinstance(app.screen, PromptScreen)
            await pilot.press(*"second turn", "enter")
            await wait_for(pilot, lambda: row(app, "demo/a").turn == 2, "turn 2")
            await wait_for(pilot, lambda: row(app, "demo/a").answer == "second turn", "answer 2")
            assert status_of(app, "demo/a") == "idle"

            # enter: the last answer, in full
            await pilot.press("enter")
            assert isinstance(app.screen, AnswerScreen)
            body = app.screen.query_one("#answer")
            await wait_for(pilot, lambda: str(body.render()) == "second turn", "the answer shown")
            await pilot.press("escape")
            assert not isinstance(app.screen, AnswerScreen)

            # p refuses an agent that is not idle
            o.run("[sleep 60] busy", provider="echo", path="demo/b", cwd="/")
            await wait_for(pilot, lambda: status_of(app, "demo/b") == "working", "demo/b working")
            assert app.select("demo/b")
            await pilot.press("p")
            assert not isinstance(app.screen, PromptScreen)

            # a: headless top cannot hand over the terminal, so it shows the command
            await pilot.press("a")
            await wait_for(pilot, lambda: getattr(app, "last_attach_hint", ""), "attach hint")
            assert "demo/b" in app.last_attach_hint and "tmux" in app.last_attach_hint

            # /: filter by status, then by glob; s: sort
            await pilot.press("slash", *"idle", "enter")
            assert shown(app) == ["g:demo", "demo/a"]
            await pilot.press("slash", *["backspace"] * 4, *"demo/*", "enter")
            assert shown(app) == ["g:demo", "demo/a", "demo/b"]
            await pilot.press("s")
            assert app.sort == "status"
            assert shown(app) == ["g:demo", "demo/b", "demo/a"]  # working before idle
            await pilot.press("s")
            assert app.sort == "age" and shown(app) == ["g:demo", "demo/a", "demo/b"]

            # k: a confirmation naming the agent; n keeps it, y kills it
            assert app.select("demo/a")
            await pilot.press("k")
            assert isinstance(app.screen, ConfirmScreen)
            assert app.screen.question == "Kill demo/a (idle, echo)?"
            await pilot.press("n")
            await pilot.pause(0.3)
            assert status_of(app, "demo/a") == "idle"
            await pilot.press("k", "y")
            await wait_for(pilot, lambda: status_of(app, "demo/a") == "ended", "demo/a ended")
            assert row(app, "demo/a").exit_reason == "killed"
            assert "demo/a" in shown(app)  # an ended agent stays on screen

            # k on a group row kills its glob, after a confirmation with the count
            await pilot.press("slash", *["backspace"] * 6, "enter")
            o.run("[sleep 60] x", provider="echo", path="grp/x1", cwd="/")
            o.run("[sleep 60] x", provider="echo", path="grp/sub/x2", cwd="/")
            await wait_for(pilot, lambda: "grp/sub/x2" in shown(app), "the grp rows")
            assert app.select("grp/")
            await pilot.press("k")
            assert app.screen.question == "Kill 2 agents matching grp/**?"
            assert "grp/sub/x2" in app.screen.detail
            await pilot.press("y")
            await wait_for(
                pilot,
                lambda: status_of(app, "grp/x1") == status_of(app, "grp/sub/x2") == "ended",
                "grp/** ended",
            )
            assert status_of(app, "demo/b") == "working"  # outside the glob

            await pilot.press("question_mark")
            assert isinstance(app.screen, HelpScreen)
            await pilot.press("escape")
            assert app.model.duplicates == 0

    try:
        run(main())
    finally:
        o.close()


def test_server_restart_mid_session_reconnects_and_resnapshots(server):
    o = server.sdk().__enter__()

    async def main():
        async with connected(server.socket) as (app, pilot):
            o.run("x", provider="testp", path="r/a", cwd="/")
            await wait_for(pilot, lambda: status_of(app, "r/a") == "working", "r/a working")
            first_snapshot = app.model.snapshot_seq
            o.close()
            server.kill_server()
            banner = app.banner
            await wait_for(pilot, lambda: banner.has_class("shown"), "the banner")
            assert "reconnecting" in str(banner.render())
            server.start_server()
            o.run("x", provider="testp", path="r/b", cwd="/")
            await wait_for(pilot, lambda: app.connected, "reconnected")
            await wait_for(pilot, lambda: status_of(app, "r/b") == "working", "r/b after restart")
            assert not banner.has_class("shown")
            assert app.model.snapshot_seq > first_snapshot  # a new snapshot, not a replay
            # r/a is what the new server says it is (working, or lost if recovery missed its pane)
            await wait_for(
                pilot,
                lambda: status_of(app, "r/a") == o.get("r/a")["status"],
                "r/a as the server has it",
            )
            o.kill("r/a")
            await wait_for(pilot, lambda: status_of(app, "r/a") == "ended", "r/a killed")
            o.kill("r/b")
            await wait_for(pilot, lambda: status_of(app, "r/b") == "ended", "r/b killed")

    try:
        run(main())
    finally:
        o.close()


class ScriptedSource:
    """A stream the test writes: what a server would send, gaps included."""

    def __init__(self):
        self.app = None
        self.resnapshots = 0

    def start(self):
        return self

    def stop(self):
        pass

    def resnapshot(self):
        self.resnapshots += 1


def test_a_gap_in_the_stream_makes_top_resnapshot_instead_of_guessing(short_tmp):
    from orcr_core.top.app import Events, Snapshot

    def agent(uuid, path, status):
        return {"uuid": uuid, "path": path, "provider": "echo", "status": status, "turn": 1}

    def status(seq, uuid, frm, to):
        data = {"path": "g/a", "from": frm, "to": to}
        return {"seq": seq, "ts": time.time(), "kind": "agent.status", "agent": uuid, "data": data}

    async def main():
        src = ScriptedSource()
        app = TopApp(short_tmp / "none.sock", source=src)
        async with app.run_test(size=SIZE) as pilot:
            app.post_message(Snapshot({"snapshot_seq": 7, "agents": [agent("a", "g/a", "idle")]}))
            await wait_for(pilot, lambda: app.connected, "the snapshot")
            app.post_message(Events([status(8, "a", "idle", "working")]))
            await wait_for(pilot, lambda: status_of(app, "g/a") == "working", "seq 8 applied")
            app.post_message(Events([status(10, "a", "working", "idle")]))  # 9 is missing
            await wait_for(pilot, lambda: src.resnapshots == 1, "a re-snapshot")
            assert not app.connected and status_of(app, "g/a") == "working"
            # what the old stream still delivers is dropped until the new snapshot
            app.post_message(Events([status(9, "a", "working", "idle")]))
            app.post_message(Snapshot({"snapshot_seq": 12, "agents": [agent("a", "g/a", "idle")]}))
            await wait_for(pilot, lambda: app.connected, "the new snapshot")
            assert status_of(app, "g/a") == "idle" and app.model.seq == 12

    asyncio.run(main())


def test_loops_show_on_their_group_fire_now_and_pause(server):
    server.run("loop", "create", "nl", "0 0 1 1 *", "--tz", "UTC", "--", "sleep", "30", check=True)

    def loop_line(app):
        return app.table.line_text(app.table.keys.index("g:nl"))

    async def main():
        app = TopApp(server.socket)
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: "nl" in app.model.loops, "the loop")
            await wait_for(pilot, lambda: "g:nl" in app.table.keys, "the loop's group line")
            assert "nl/ (no agents)" in loop_line(
                app
            ) and "loop 0 0 1 1 * UTC · next " in loop_line(app)
            assert app.select("nl/")
            await pilot.press("f")  # fire now: its run.* events bring the loop line up to date
            await wait_for(pilot, lambda: "1 running, 0 pending" in loop_line(app), "a run")
            await pilot.press("space")
            await wait_for(pilot, lambda: "PAUSED" in loop_line(app), "paused")
            assert server.sdk().__enter__().loop_get("nl")["status"] == "paused"
            await pilot.press("space")
            await wait_for(pilot, lambda: "PAUSED" not in loop_line(app), "resumed")
            server.run("loop", "run", "stop", "nl", "--wait", check=True)
            await wait_for(pilot, lambda: "last stopped" in loop_line(app), "the run stopped")

    asyncio.run(main())
    frame = json.loads(server.run("top", "--once", "--json", check=True).stdout)
    (group,) = [g for g in frame["groups"] if g["name"] == "nl"]
    assert (
        group["loop"]["schedule"] == "0 0 1 1 *" and group["loop"]["last_run_status"] == "stopped"
    )


def test_K_kills_what_the_filter_glob_matches_after_a_confirmation(server):
    o = server.sdk().__enter__()
    for path in ("k/a", "k/b", "k/deep/c", "x/c"):
        o.run("x", provider="testp", path=path, cwd="/")

    async def main():
        app = TopApp(server.socket)
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(
                pilot,
                lambda: (
                    [status_of(app, p) for p in ("k/a", "k/b", "k/deep/c", "x/c")]
                    == ["working"] * 4
                ),
                "four working agents",
            )
            await pilot.press("K")  # no glob in the filter: nothing to kill
            assert not isinstance(app.screen, ConfirmScreen)
            await pilot.press("slash", *"k/*", "enter")
            assert shown(app) == ["g:k", "k/a", "k/b"]
            await pilot.press("K")
            assert isinstance(app.screen, ConfirmScreen)
            assert app.screen.question == "Kill 2 agents matching k/*?"
            assert app.screen.detail == "k/a (working)\nk/b (working)"
            await pilot.press("y")
            await wait_for(
                pilot,
                lambda: status_of(app, "k/a") == status_of(app, "k/b") == "ended",
                "k/* ended",
            )
            assert status_of(app, "k/deep/c") == status_of(app, "x/c") == "working"

    try:
        asyncio.run(main())
    finally:
        o.close()
