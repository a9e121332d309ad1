"""Both halves of every notification rule's condition, through a real sink (a webhook
to a local HTTP receiver) and real endings (issue 33 item 19). ``agent_failed`` is
"ended failed or lost", ``loop_failed`` "a run ended failed or timeout", ``turn_ended``
"for ``match`` paths or turns ``longer_than``": each half is tested on its own, beside
an ending the rule must not notify about. The other rules' halves are tested in
``tests/test_notify.py``: ``blocked`` (a question mid-turn; a dialog at start),
``task_parked`` (inbox/; failed/).
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys

import pytest
from test_notify import Receiver, _configure

from orcr_core.kit.testing import until

pytestmark = pytest.mark.parametrize("live", ["tmux"], indirect=True)


@pytest.fixture
def receiver():
    rec = Receiver()
    yield rec
    rec.close()


def _subjects(receiver, rule: str) -> list[str]:
    return sorted(n["subject"] for n in receiver.notes() if n["rule"] == rule)


def _settled(live) -> None:
    """The notifier has matched every event written so far (its cursor is the last
    seq) and every notification it made is sent: nothing more is on its way."""
    last = max(e["seq"] for e in live.events())
    until(lambda: int(_query(live, CURSOR)[0][0]) >= last, 30, what="the notifier's cursor")
    until(lambda: _query(live, UNSENT)[0][0] == 0, 30, what="every notification sent")


CURSOR = "SELECT COALESCE(MAX(value), 0) FROM meta WHERE key = 'notify_cursor'"
UNSENT = "SELECT COUNT(*) FROM notification WHERE state != 'sent'"


def _query(live, sql: str) -> list[tuple]:
    conn = sqlite3.connect(live.path / "store.db", timeout=10)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def test_agent_failed_fires_for_failed_and_for_lost_not_for_a_kill(live, receiver):
    """An agent whose program is missing ends ``failed``; one whose pane is closed
    behind orcr's back ends ``lost``; one killed with ``agent kill`` ends ``killed``.
    Planted: the rule fires for ``lost`` only -> fails; for ``failed`` only -> fails."""
    _configure(live, receiver.url)
    live.start_server()
    live.run("agent", "run", "-p", "echo", "--path", "n/killed", "hi", check=True)
    live.run("agent", "wait", "n/killed", "--timeout", "30s", check=True)
    live.run("agent", "kill", "n/killed", check=True)
    assert live.ended("n/killed")["exit_reason"] == "killed"
    live.run("agent", "run", "-p", "command", "--path", "n/failed", "--prompt", "hi",
             "--", "no-such-program-orcr", check=True)  # fmt: skip
    assert live.ended("n/failed")["exit_reason"] == "failed"
    live.run("agent", "run", "-p", "echo", "--path", "n/lost", "hi", check=True)
    live.run("agent", "wait", "n/lost", "--timeout", "30s", check=True)
    pane = live.get("n/lost")["pane_id"]
    subprocess.run(
        ["tmux", "-S", str(live.mux.socket), "kill-pane", "-t", pane], check=True, timeout=10
    )
    assert live.ended("n/lost")["exit_reason"] == "lost"
    until(lambda: len(receiver.posts) >= 2, 30, what="two agent_failed notifications")
    _settled(live)
    notes = {n["subject"]: n for n in receiver.notes()}
    assert sorted(notes) == ["n/failed", "n/lost"], notes
    assert notes["n/failed"]["title"] == "n/failed ended failed"
    assert "command not found" in notes["n/failed"]["text"]
    assert notes["n/failed"]["action"] == "orcr agent get n/failed"
    assert notes["n/lost"]["action"] == "orcr agent resume n/lost"


def test_loop_failed_fires_for_failed_and_for_timeout_loop_ok_for_ok(live, receiver):
    """Three runs: one exits 1, one outlives its ``--timeout``, one exits 0. With
    ``loop_ok`` on, the first two notify ``loop_failed`` and the third ``loop_ok``.
    Planted: ``loop_failed`` for ``failed`` only -> fails; for ``timeout`` only -> fails;
    ``loop_ok`` never fires -> fails."""
    _configure(live, receiver.url, extra="[notify.rules.loop_ok]\nenabled = true\n")
    live.start_server()
    cases = (
        ("exits1", ["--", "false"]),
        ("slow", ["--timeout", "1s", "--", sys.executable, "-c", "import time; time.sleep(60)"]),
        ("fine", ["--", "true"]),
    )
    for name, args in cases:
        live.run("loop", "create", name, "0 0 1 1 *", *args, check=True)
        live.run("loop", "run", "start", name, check=True)
    until(lambda: len(receiver.posts) >= 3, 60, what="three loop notifications")
    _settled(live)
    got = {n["loop"]: (n["rule"], n["title"].rsplit(" ", 1)[1]) for n in receiver.notes()}
    assert got == {
        "exits1": ("loop_failed", "failed"),
        "slow": ("loop_failed", "timeout"),
        "fine": ("loop_ok", "ok"),
    }, receiver.notes()


def test_turn_ended_longer_than_fires_only_for_a_long_turn(live, receiver):
    """``turn_ended`` with ``longer_than`` and no ``match``: a 4-second turn notifies,
    a quick one does not. (Its ``match`` half is in ``tests/test_notify.py``.)
    Planted: ``longer_than`` ignored -> fails; the rule needing a ``match`` -> fails."""
    _configure(
        live, receiver.url, extra='[notify.rules.turn_ended]\nenabled = true\nlonger_than = "3s"\n'
    )
    live.start_server()
    live.run("agent", "run", "-p", "echo", "--path", "t/quick", "hi", check=True)
    live.run("agent", "wait", "t/quick", "--timeout", "30s", check=True)
    live.run("agent", "run", "-p", "echo", "--path", "t/long", "[sleep 4] hi", check=True)
    live.run("agent", "wait", "t/long", "--timeout", "30s", check=True)
    until(lambda: receiver.posts, 30, what="the turn_ended notification")
    _settled(live)
    assert _subjects(receiver, "turn_ended") == ["t/long"], receiver.notes()
