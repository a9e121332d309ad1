"""Re-match means the agent is still there (issue 10 item 1): a pane found again by
its marks counts as the agent only if the process orcr started still runs in it.

herdr (the emulator): a cold restart restores every pane under its labels as a plain
shell with a new terminal id. tmux: ``respawn-pane -k`` puts a shell in the agent's
pane (same pane id, same marks, another pid). Either way the row becomes lost, then
ended (lost), and the shell left in the pane is closed (it carries the row's marks).
"""

from __future__ import annotations

import sqlite3
import subprocess

import pytest

from orcr_core.kit.testing import until

#: the path differs by herdr protocol: also on herdr 0.8 (conftest.py)
pytestmark = pytest.mark.herdr_08


def _pane_process(home, uuid: str):
    conn = sqlite3.connect(home.path / "store.db")
    try:
        row = conn.execute("SELECT pane_process FROM agent WHERE uuid = ?", (uuid,)).fetchone()
    finally:
        conn.close()
    return row[0] if row else None


def _replace_with_shell(live, pane_id: str) -> None:
    if live.mux.kind == "herdr":
        live.mux.emulator.restart()  # panes come back as plain shells, new terminal ids
    else:
        subprocess.run(
            ["tmux", "-S", str(live.mux.socket), "respawn-pane", "-k", "-t", pane_id, "/bin/sh"],
            check=True,
        )


def test_a_pane_restored_as_a_shell_is_not_the_agent(live):
    # tmux says nothing of a respawned pane (its control mode shows only the new
    # process's output): the reconciler's pass finds it, which at the default 30 s ran
    # into this test's own 30 s wait (r/gone ended after 29.6 s on a quiet machine)
    live.config(live.mux.config() + '[timings]\npoll_every = "50ms"\nreconcile_every = "1s"\n')
    live.start_server()
    live.run("agent", "run", "-p", "echo", "--path", "r/gone", "hi", check=True)
    live.run("agent", "wait", "r/gone", "--timeout", "30s", check=True)
    live.run("agent", "run", "-p", "echo", "--path", "r/stays", "hello", check=True)
    live.run("agent", "wait", "r/stays", "--timeout", "30s", check=True)
    gone = live.get("r/gone")
    until(lambda: _pane_process(live, gone["uuid"]), 15, what="the pane's process recorded")
    stays = live.get("r/stays")
    until(lambda: _pane_process(live, stays["uuid"]), 15, what="the pane's process recorded")

    _replace_with_shell(live, gone["pane_id"])

    ended = until(
        lambda: (a := live.get("r/gone"))["status"] == "ended" and a, 30, what="r/gone ended"
    )
    assert ended["exit_reason"] == "lost", ended
    statuses = [e["data"] for e in live.events(gone["uuid"]) if e["kind"] == "agent.status"]
    lost = [d for d in statuses if d["to"] == "lost"]
    # herdr 0.9 was told how to resume it: lost while herdr may still restore it
    # (agents/native.py), then closed as another process once the grace has passed
    why = "may be restoring" if live.mux.protocol == 22 else "another process"
    assert lost and why in lost[0]["why"], statuses
    # the shell left in its pane carried the row's marks: closed
    until(lambda: "r/gone" not in live.mux.labels(), 15, what="the leftover shell closed")
    # nothing is typed into a shell: the path is free for a new agent
    live.run("agent", "run", "-p", "echo", "--path", "r/gone", "again", check=True)
    live.run("agent", "wait", "r/gone", "--timeout", "30s", check=True)
    assert live.run("agent", "read", "r/gone", check=True).stdout == "again\n"
    if live.mux.kind == "tmux":
        # the untouched agent is still its own process, and still answers
        assert live.get("r/stays")["status"] == "idle"
        live.run("agent", "send", "r/stays", "more", check=True)
        live.run("agent", "wait", "r/stays", "--timeout", "30s", check=True)
        assert live.run("agent", "read", "r/stays", check=True).stdout == "more\n"
    else:
        # herdr restarted under every pane: r/stays is gone too
        a = until(lambda: (a := live.get("r/stays"))["status"] == "ended" and a, 30)
        assert a["exit_reason"] == "lost"


def test_a_restart_of_orcr_alone_keeps_its_agents(live):
    """The same process still in the pane (orcr restarted, the multiplexer did not):
    recovery re-matches it and the agent goes on."""
    live.start_server()
    live.run("agent", "run", "-p", "echo", "--path", "r/keep", "hi", check=True)
    live.run("agent", "wait", "r/keep", "--timeout", "30s", check=True)
    uuid = live.get("r/keep")["uuid"]
    until(lambda: _pane_process(live, uuid), 15, what="the pane's process recorded")
    live.kill_server()
    live.start_server()
    live.run("agent", "send", "r/keep", "more", check=True)
    live.run("agent", "wait", "r/keep", "--timeout", "30s", check=True)
    assert live.run("agent", "read", "r/keep", check=True).stdout == "more\n"


def test_recovery_finds_a_shell_where_the_agent_was(live):
    """orcr is down while the multiplexer puts a shell in the agent's pane: recovery,
    before the socket opens, makes the row lost (a repair) and closes the shell."""
    live.start_server()
    live.run("agent", "run", "-p", "echo", "--path", "r/down", "hi", check=True)
    live.run("agent", "wait", "r/down", "--timeout", "30s", check=True)
    agent = live.get("r/down")
    until(lambda: _pane_process(live, agent["uuid"]), 15, what="the pane's process recorded")
    live.kill_server()
    _replace_with_shell(live, agent["pane_id"])
    live.start_server()
    statuses = [e["data"] for e in live.events(agent["uuid"]) if e["kind"] == "agent.status"]
    lost = [d for d in statuses if d["to"] == "lost"]
    assert lost and lost[0].get("repair") is True, statuses  # recovery's, not a later poll's
    ended = until(lambda: (a := live.get("r/down"))["status"] == "ended" and a, 30)
    assert ended["exit_reason"] == "lost"
    until(lambda: "r/down" not in live.mux.labels(), 15, what="the leftover shell closed")


@pytest.mark.parametrize("live", ["herdr", "herdr08"], indirect=True)
def test_a_pane_herdr_could_not_restore_is_lost_with_its_error(live, short_tmp):
    """herdr 0.9.2 keeps a pane whose saved directory is gone after a restart, with
    ``restore_error`` and nothing running: the agent is lost with that error in its
    row, never idle. herdr 0.8 starts a shell in $HOME instead: another process."""
    work = short_tmp / "work"
    work.mkdir()
    live.start_server()
    live.run("agent", "run", "-p", "echo", "--cwd", str(work), "--path", "e/one", "hi", check=True)
    live.run("agent", "wait", "e/one", "--timeout", "30s", check=True)
    uuid = live.get("e/one")["uuid"]
    until(lambda: _pane_process(live, uuid), 15, what="the pane's process recorded")
    live.mux.emulator.stop()
    work.rmdir()
    live.mux.emulator.start()
    ended = until(lambda: (a := live.get("e/one"))["status"] == "ended" and a, 30, what="ended")
    assert ended["exit_reason"] == "lost", ended
    lost = [
        e["data"]
        for e in live.events(uuid)
        if e["kind"] == "agent.status" and e["data"]["to"] == "lost"
    ]
    assert len(lost) == 1, lost
    if live.mux.protocol == 22:
        assert "could not restore" in lost[0]["why"], lost
        assert f"saved directory is unavailable: {work}" in ended["error"], ended
    else:
        assert "another process" in lost[0]["why"], lost
    until(lambda: "e/one" not in live.mux.labels(), 15, what="the leftover pane closed")
