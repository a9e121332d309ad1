"""Agents that finish (issue 38 part 1): ``agent run --rm`` ends the agent ``done``
with its first turn, in the turn's own commit; ``--gc-after`` is a per-run GC.

Real tmux, the echo agent, the real CLI and a real SQLite store.
"""

from __future__ import annotations

import json
import signal
import sqlite3

import pytest

from orcr_core.kit.testing import until

TMUX = pytest.mark.parametrize("live", ["tmux"], indirect=True)

CAPS = "[concurrency]\nmax = 4\necho = 3\n"


def _rows(home) -> dict[str, dict]:
    out = home.run("agent", "ls", "--all", "--json", check=True).stdout
    return {a["path"]: a for a in json.loads(out)}


@TMUX
def test_a_batch_of_rm_jobs_drains_through_the_caps(live):
    """Twelve --rm echo jobs under caps of 4 global / 3 echo all end ``done`` by
    themselves, never more than 3 live at once, and each answer stays readable.
    (It asserted exactly 3 live at the peak once, and failed under load: each admission
    is a CLI call of its own, so a job may end before the next is admitted.)

    Planted: the ``rm`` branch in turns._set dropped (agents go idle) -> fails (9 stay
    queued). Planted: agent.rm not passed to the row (RunSpec rm ignored) -> fails."""
    live.config(live.mux.config() + '[timings]\npoll_every = "50ms"\n' + CAPS)
    live.start_server()
    n = 12
    for i in range(n):
        live.run(
            "agent", "run", "--rm", "-p", "echo", "--path", f"job/{i}", f"answer {i}", check=True
        )

    def drained():
        rows = _rows(live)
        return rows if all(r["status"] == "ended" for r in rows.values()) else None

    rows = until(drained, 90, "the --rm batch to drain")
    assert len(rows) == n
    assert {r["exit_reason"] for r in rows.values()} == {"done"}, rows
    assert all(r["rm"] for r in rows.values())
    for i in range(n):  # read and get work on the ended row
        read = json.loads(live.run("agent", "read", f"job/{i}", "--json", check=True).stdout)
        assert f"answer {i}" in (read["text"] or ""), read
        assert live.get(f"job/{i}")["exit_reason"] == "done"
    plain = live.run("agent", "read", "job/0", check=True).stdout
    assert "answer 0" in plain
    # the echo cap held throughout: never 4 echo agents live at once
    live_now, peak = set(), 0
    for e in live.events():
        if e["kind"] != "agent.status":
            continue
        if e["data"]["to"] == "starting":
            live_now.add(e["agent"])
        elif e["data"]["to"] == "ended":
            live_now.discard(e["agent"])
        peak = max(peak, len(live_now))
    assert 1 <= peak <= 3  # (admissions are one CLI call each: a job may end before the next)
    # the turn's end is the agent's: working -> ended, no idle in between
    ends = [
        e["data"]
        for e in live.events()
        if e["kind"] == "agent.status" and e["data"]["to"] == "ended"
    ]
    assert {(d["from"], d["exit_reason"]) for d in ends} == {("working", "done")}
    until(lambda: not live.mux.labels(), 30, "the done agents' panes to close")


@TMUX
def test_sigkill_after_the_turns_end_still_ends_the_agent(live):
    """SIGKILL right after the commit that ends the turn (``after_rm_end``, before the
    pane is closed): the store already says ended ``done`` (the turn's end and the
    agent's are one commit); after a restart the pane is closed and the answer read.

    Planted: the turn's end commits idle and the rm end is left to a later step ->
    fails (the row is idle in the store). Planted: rows ended ``done`` skipped by
    ``reconcile._count`` -> fails (the late pane is never closed)."""
    live.start_server(extra_env={"ORCR_FAULT": "after_rm_end"})
    live.run("agent", "run", "--rm", "-p", "echo", "--path", "crash/job", "the answer", check=True)
    assert live.proc.wait(60) == -signal.SIGKILL, live.server_log()
    conn = sqlite3.connect(live.path / "store.db")
    try:
        status, reason = conn.execute(
            "SELECT status, exit_reason FROM agent WHERE path = 'crash/job'"
        ).fetchone()
    finally:
        conn.close()
    assert (status, reason) == ("ended", "done")
    assert "crash/job" in live.mux.labels()  # killed before its pane was closed
    live.start_server()
    until(lambda: "crash/job" not in live.mux.labels(), 30, "the late pane to close")
    row = live.get("crash/job")
    assert (row["status"], row["exit_reason"]) == ("ended", "done")
    read = json.loads(live.run("agent", "read", "crash/job", "--json", check=True).stdout)
    assert "the answer" in read["text"]


@TMUX
def test_gc_after_per_run(live):
    """``--gc-after 1s`` ends that idle agent ``gc`` while one without it stays idle
    (timings.gc_after is 24 h). Planted: monitor ignores the row's gc_after -> fails."""
    live.start_server()
    live.run(
        "agent", "run", "-p", "echo", "--path", "gc/short", "--gc-after", "1s", "hi", check=True
    )
    live.run("agent", "run", "-p", "echo", "--path", "gc/long", "hi", check=True)
    live.ended("gc/short", timeout=30)
    assert live.get("gc/short")["exit_reason"] == "gc"
    assert live.get("gc/short")["gc_after"] == 1.0
    assert live.get("gc/long")["status"] == "idle"
    bad = live.run("agent", "run", "-p", "echo", "--gc-after", "0s", "hi")
    assert bad.returncode == 2 and "1s to 365d" in bad.stderr


@TMUX
def test_config_agent_rm(live):
    """``[agent] rm = true`` makes every run a job; ``--rm`` is its flag form.
    Planted: handler ignores agent.rm -> fails (the agent goes idle)."""
    live.config(live.mux.config() + '[timings]\npoll_every = "50ms"\n[agent]\nrm = true\n')
    live.start_server()
    live.run("agent", "run", "-p", "echo", "--path", "cfg/job", "hi", check=True)
    row = live.ended("cfg/job", timeout=30)
    assert row["exit_reason"] == "done"


def test_an_rm_jobs_end_is_a_turn_end_for_notifications():
    """``turn_ended`` fires for ``working -> ended done`` as for ``working -> idle``;
    a kill of a working agent is no turn's end.
    Planted: classify matching only ``to == "idle"`` -> fails."""
    from orcr_core.notify.rules import classify

    def ev(to, reason=None):
        data = {"from": "working", "to": to, "path": "job/1", "turn_status": "completed"}
        if reason:
            data["exit_reason"] = reason
        return {"kind": "agent.status", "data": data}

    facts = {"turn_seconds": 3.0}
    assert classify(ev("ended", "done"), facts)[0] == "turn_ended"
    assert classify(ev("idle"), facts)[0] == "turn_ended"
    assert classify(ev("ended", "killed"), facts) is None
