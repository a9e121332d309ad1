"""Usage per turn (issue 25): the echo agent reports words as tokens, the monitor
stores each ended turn's usage in the transaction of the turn's end, and
``agent get``/``agent ls`` show it. A SIGKILL between the turn's end and its
usage write loses nothing, and a restart re-reading the transcript counts
nothing twice."""

from __future__ import annotations

import json
import signal
import sqlite3

import pytest

from orcr_core.kit.testing import until


def _get(live, path):
    return json.loads(live.run("agent", "get", path, "--json", check=True).stdout)


def test_echo_usage_per_turn_and_total_in_get_and_ls(live):
    live.start_server()
    live.run("agent", "run", "--provider", "echo", "--path", "u/a", "one two three", check=True)
    live.run("agent", "wait", "u/a", "--timeout", "30s", check=True)
    live.run("agent", "send", "u/a", "four five", check=True)
    live.run("agent", "wait", "u/a", "--timeout", "30s", check=True)
    a = _get(live, "u/a")
    assert [(t["turn"], t["input"], t["output"]) for t in a["usage_turns"]] == [
        (1, 3, 3),
        (2, 2, 2),
    ]
    assert a["usage"]["tokens"] == 10 and a["usage"]["model"] == "echo"
    text = live.run("agent", "get", "u/a", check=True).stdout
    assert "usage: 10 tokens" in text and "turn 2: 4 tokens" in text
    rows = json.loads(live.run("agent", "ls", "--json", check=True).stdout)
    assert [r["usage"]["tokens"] for r in rows if r["path"] == "u/a"] == [10]
    table = live.run("agent", "ls", check=True).stdout.splitlines()
    assert "TOKENS" in table[0] and " 10 " in table[1], table
    # top: the turn end's event carries what its turns spent; the snapshot the totals
    turn_ends = [
        e["data"].get("tokens")
        for e in live.events(a["uuid"])
        if e["kind"] == "agent.status" and e["data"]["from"] == "working"
    ]
    assert turn_ends == [6, 4]
    frame = json.loads(live.run("top", "--once", "--json", check=True).stdout)
    (row,) = [r for g in frame["groups"] for r in g["agents"] if r["path"] == "u/a"]
    assert row["tokens"] == 10 and frame["header"]["tokens"] == 10


def test_a_provider_without_usage_shows_a_dash(live):
    live.start_server()
    live.run("agent", "run", "--provider", "command", "--path", "u/c", "--", "sleep", "60")
    until(lambda: _get(live, "u/c")["status"] in ("idle", "working"), what="running")
    a = _get(live, "u/c")
    assert a["usage"] is None and a["usage_turns"] == []
    assert "usage: -" in live.run("agent", "get", "u/c", check=True).stdout


def _stored(live, path: str) -> tuple[int, list[tuple[int, int]]]:
    """What the store holds of an agent's turns, read with sqlite3 while no server runs:
    its ``turns_done`` and its usage rows' (input, output)."""
    conn = sqlite3.connect(live.path / "store.db", timeout=10)
    try:
        (uuid, done) = conn.execute(
            "SELECT uuid, turns_done FROM agent WHERE path = ?", (path,)
        ).fetchone()
        rows = conn.execute(
            "SELECT input, output FROM turn_usage WHERE agent = ? ORDER BY turn", (uuid,)
        ).fetchall()
    finally:
        conn.close()
    return done, rows


@pytest.mark.parametrize(
    "point, kept", [("before_turn_usage", "neither"), ("after_turn_usage", "both")]
)
def test_sigkill_between_turn_end_and_usage_write_loses_and_doubles_nothing(live, point, kept):
    """A SIGKILL as the usage rows are about to be written (``before_turn_usage``, in
    :func:`orcr_core.usage.record.record`) finds the turn's end not committed either;
    one right after the commit (``after_turn_usage``) finds both. The store is read
    before the restart; the restarted server then records the turn once, and a second
    restart counts nothing twice. Planted: the usage written after the turn end's
    commit -> fails at before_turn_usage (turns_done 1 with no usage row, and the
    turn's tokens are never recorded)."""
    live.start_server(extra_env={"ORCR_FAULT": point})
    live.run("agent", "run", "--provider", "echo", "--path", "u/k", "alpha beta")
    assert live.proc.wait(30) == -signal.SIGKILL, live.server_log()
    done, rows = _stored(live, "u/k")
    assert (done, rows) == ((0, []) if kept == "neither" else (1, [(2, 2)]))
    live.start_server()
    live.run("agent", "wait", "u/k", "--timeout", "30s", check=True)
    a = _get(live, "u/k")
    assert [(t["input"], t["output"]) for t in a["usage_turns"]] == [(2, 2)], a
    # a restart reads the transcript from its start again: the turn is not counted twice
    live.kill_server()
    live.start_server()
    live.run("agent", "wait", "u/k", "--timeout", "30s", check=True)
    assert _get(live, "u/k")["usage"]["tokens"] == 4
    assert _stored(live, "u/k") == (1, [(2, 2)])


def test_totals_take_the_last_turns_model_in_one_query(short_tmp):
    """``agent ls``'s usage totals come from one grouped query per 500 agents, the
    model being the last turn's whatever order the rows were written in.
    Planted: the bare model column next to MIN(turn) instead of MAX -> fails."""
    from orcr_core.store import db as store_db
    from orcr_core.store.models import TurnUsage, db
    from orcr_core.usage.record import of_agents

    store_db.open_store(short_tmp / "store.db")
    try:
        rows = [("a", 2, "m2", 5), ("a", 3, "m3", 7), ("a", 1, "m1", 1), ("b", 1, None, 4)]
        with db.atomic():
            for agent, turn, model, n in rows:
                TurnUsage.create(agent=agent, turn=turn, path=agent, provider="p",
                                 model=model, ended_at=0.0, input=n, output=1)  # fmt: skip
        totals = of_agents(["a", "b", "c"])
    finally:
        store_db.close_store()
    assert totals["a"] == {"input": 13, "output": 3, "cache_read": 0, "cache_write": 0,
                           "turns": 3, "model": "m3", "tokens": 16}  # fmt: skip
    assert totals["b"]["model"] is None and totals["b"]["tokens"] == 5
    assert "c" not in totals
