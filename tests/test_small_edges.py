"""Small edges a new user met (issue 38 part 7): each output and error says what it
means, with the real CLI against a real server."""

from __future__ import annotations


def test_loop_ls_with_no_loops_says_so(server):
    """Planted: the empty branch removed -> stdout is empty, fails."""
    r = server.run("loop", "ls", check=True)
    assert r.stdout.strip() == "no loops (--all shows ended ones)"
    assert server.run("loop", "ls", "--all", check=True).stdout.strip() == "no loops"
    assert server.run("loop", "ls", "--json", check=True).stdout.strip() == "[]"


def test_a_negative_cron_field_is_a_cadence_error_not_an_option(server):
    """Planted: every word starting with '-' taken as an option -> "no such option:
    -1 * * * *", fails."""
    r = server.run("loop", "create", "x", "-1 * * * *", "--", "true")
    assert r.returncode == 1, r.stderr
    assert "the minute field '-1' is not valid (allowed: 0-59)" in r.stderr
    assert "no such option" not in r.stderr
    r = server.run("loop", "create", "x", "0 9 * * *", "--bogus", "--", "true")
    assert r.returncode == 2 and "no such option: --bogus" in r.stderr


def test_top_labels_drift_counts_as_totals_with_their_age():
    """``lost 3`` from last night must not read as three agents lost now. Planted:
    drift_line without the total label -> fails."""
    from datetime import UTC, datetime, timedelta

    from orcr_core.top.text import drift_line

    then = (datetime.now(UTC) - timedelta(hours=3, seconds=5)).isoformat().replace("+00:00", "Z")
    h = {
        "drift": {"lost": 3, "repaired": 0, "orphan_agent_panes": 1, "unmarked_panes": 0},
        "drift_at": {"lost": then, "repaired": None, "orphan_agent_panes": then},
        "driver": {"name": "tmux", "error": None},
    }
    line = drift_line(h)
    assert line.startswith("drift lost 3 (total, last 3h00m ago) repaired 0 orphan panes 1 ")
    # zero counts stay short, as docs/top.md shows them
    h["drift"]["lost"] = 0
    assert drift_line(h).startswith("drift lost 0 repaired 0 orphan panes 1 unmarked 0")


def test_top_turn_is_right_for_an_agent_that_was_starting_when_top_opened(server):
    """``top``'s TURN stayed 0 for an agent snapshotted while starting: its row's turn
    was 0 and its ``prompt.requested`` (turn 1) was before the cursor. Replays the real
    events of a real agent from that point. Planted: neither agent.status nor
    prompt.applied carrying the turn into the model -> TURN 0, fails."""
    import json
    import sqlite3

    from orcr_core.kit.testing import until
    from orcr_core.top.model import FleetModel

    server.run("agent", "run", "--provider", "testp", "--path", "t/a", "hi", check=True)
    a = until(lambda: (lambda a: a if a["status"] == "working" else None)(server.get("t/a")))
    assert a["turn"] == 1
    con = sqlite3.connect(server.path / "store.db")
    try:
        rows = con.execute(
            "SELECT seq, ts, kind, agent, data FROM event WHERE agent = ? ORDER BY seq",
            (a["uuid"],),
        ).fetchall()
    finally:
        con.close()
    evs = [
        {"seq": s, "ts": ts, "kind": k, "agent": ag, "data": json.loads(d)}
        for s, ts, k, ag, d in rows
    ]
    requested = next(e["seq"] for e in evs if e["kind"] == "prompt.requested")
    # the row as watch.open showed it then: starting, turn 0 (set to 1 only with working)
    starting = dict(a, status="starting", turn=0)
    m = FleetModel()
    m.load_snapshot({"agents": [starting], "snapshot_seq": requested})
    for e in evs:
        if e["seq"] > requested:
            m.seq = e["seq"] - 1  # other agents' and the server's events are not here
            m.apply(e)
    row = m.rows[a["uuid"]]
    assert row.status == "working" and row.turn == 1
