"""HerdrDriver.discover: the agents in the user's other herdr sessions, read-only."""

from __future__ import annotations

import socket

from orcr_herdr.client import HerdrClient
from orcr_herdr.driver import HerdrDriver, tab_label
from orcr_herdr.paths import config_dir
from orcr_testing.herdr.emulator import Emulator

from orcr_core.contracts import SessionPointer


def _other(short_tmp, name: str, made: list) -> Emulator:
    emu = Emulator.for_session(short_tmp / "xdg", name, shell=["/bin/sh"]).start()
    made.append(emu)
    return emu


def test_discover_lists_agents_in_other_sessions_only(make_emulator, config_factory, short_tmp):
    own = make_emulator()  # session "orcr": orcr's own, never listed
    own.add_agent("claude", "working")
    made: list[Emulator] = []
    try:
        work = _other(short_tmp, "work", made)
        claude = work.add_agent("claude", "working", cwd="/tmp", label="review")
        codex = work.add_agent("codex", "idle")
        shell = work.add_agent("claude")
        work.exit_agent(shell)  # a plain shell again: not an agent
        work.set_agent_session(claude, "sess-1")
        default = _other(short_tmp, "default", made)  # herdr's default session counts too
        default.add_agent("codex", "blocked")
        found = HerdrDriver(config_factory()).discover()
        assert sorted(found) == ["default", "work"]
        work_agents = {a.pane_id: a for a in found["work"]}
        assert sorted(work_agents) == sorted([claude, codex])
        a = work_agents[claude]
        assert (a.session, a.agent, a.agent_status, a.cwd, a.label) == (
            "work",
            "claude",
            "working",
            "/tmp",
            "review",
        )
        assert a.terminal_id == work.pane(claude).terminal_id
        assert a.agent_session == SessionPointer("herdr:claude", "id", "sess-1")
        assert (work_agents[codex].agent, work_agents[codex].agent_status) == ("codex", "idle")
        assert [(a.agent, a.agent_status) for a in found["default"]] == [("codex", "blocked")]
        # read-only: one snapshot per session and nothing else
        for emu in (work, default):
            assert {r["method"] for r in emu.requests} == {"session.snapshot"}
            assert emu.violations == []
    finally:
        for emu in made:
            emu.stop()


def test_discover_tells_gone_sessions_from_silent_ones(make_emulator, config_factory, short_tmp):
    make_emulator()
    made: list[Emulator] = []
    try:
        quiet = _other(short_tmp, "quiet", made)
        quiet.add_agent("claude", "idle")
        stale = short_tmp / "xdg" / "herdr" / "sessions" / "stale"
        stale.mkdir(parents=True)
        leftover = socket.socket(socket.AF_UNIX)  # a socket file nobody listens on
        leftover.bind(str(stale / "herdr.sock"))
        leftover.close()
        quiet.mute()  # it exists and accepts, but does not answer
        found = HerdrDriver(config_factory()).discover()
        assert found == {"quiet": None}  # "stale" is not running: left out, so gone
        quiet.unmute()
        assert [a.agent for a in HerdrDriver(config_factory()).discover()["quiet"]] == ["claude"]
    finally:
        for emu in made:
            emu.stop()


def test_discover_skips_panes_of_orcr_instances(make_emulator, config_factory, short_tmp):
    """A pane whose tab carries orcr marks is some orcr instance's managed agent."""
    make_emulator()
    made: list[Emulator] = []
    try:
        other = _other(short_tmp, "orcr-other", made)
        mine = other.add_agent("claude", "idle")
        ws = other.pane(mine).workspace_id
        layout = HerdrClient(other.socket_path).request(
            "layout.apply",
            {
                "workspace_id": ws,
                "tab_label": tab_label("a", "inst2", "tok2"),
                "root": {"type": "pane", "label": "x/a", "command": ["/bin/sh"]},
            },
        )["layout"]
        other.set_agent(layout["root"]["pane_id"], "claude", "working")  # orcr's agent there
        found = HerdrDriver(config_factory()).discover()
        assert [a.pane_id for a in found["orcr-other"]] == [mine]
    finally:
        for emu in made:
            emu.stop()


def test_own_session_is_skipped_by_socket_path_too(make_emulator, config_factory, short_tmp):
    """With herdr.socket naming a session's socket, that session is orcr's own."""
    own = make_emulator()
    own.add_agent("claude")
    sock = config_dir() / "sessions" / "orcr" / "herdr.sock"
    assert HerdrDriver(config_factory(session="elsewhere", socket=str(sock))).discover() == {}
