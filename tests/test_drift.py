"""Drift counters live in the store (issue 8 item 14): a server restart or a
crash keeps them and their timestamps, and each count commits in the very
transaction of the status change it counts, so the counters always agree with
the event log, whatever moment the server dies at."""

from __future__ import annotations

import signal
import sqlite3
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "plugins"))
import orcr_test_driver as td  # noqa: E402

from orcr_core.kit.testing import until  # noqa: E402

CONFIG = (
    '[driver]\nname = "test"\n[timings]\npoll_every = "50ms"\nreconcile_every = "200ms"\n'
    'prompt_confirm = "200ms"\n'
)


def _stored_drift(home) -> dict[str, int]:
    """The counters as the store holds them (read directly, as an auditor would)."""
    conn = sqlite3.connect(home.path / "store.db")
    try:
        return {name: value for name, value in conn.execute("SELECT name, value FROM drift")}
    except sqlite3.OperationalError:  # killed before the migration that makes the table
        return {}
    finally:
        conn.close()


def _explained(home) -> list[str]:
    """The counts must equal what the event log shows: every loss an
    ``agent.status`` to ``lost`` (or a resumed start ended ``lost``), every repair a ``lost`` row brought back or a
    start recovery picked up again (``agent.repaired``)."""
    evs = home.events()
    moves = [e["data"] for e in evs if e["kind"] == "agent.status"]
    lost = sum(1 for m in moves if m["to"] == "lost")
    # a resumed start whose new pane vanished while the server was down ends lost at once
    lost += sum(1 for m in moves if m["from"] == "starting" and m.get("exit_reason") == "lost")
    repaired = sum(1 for m in moves if m["from"] == "lost" and m["to"] in ("working", "idle"))
    repaired += sum(1 for e in evs if e["kind"] == "agent.repaired")
    stored = _stored_drift(home)
    problems = []
    if stored.get("lost", 0) != lost:
        problems.append(f"drift lost {stored.get('lost', 0)}, events show {lost} losses")
    if stored.get("repaired", 0) != repaired:
        problems.append(f"drift repaired {stored.get('repaired', 0)}, events show {repaired}")
    return problems


def test_drift_counters_and_their_times_survive_a_restart(orcr_home):
    orcr_home.config(CONFIG)
    td.add_pane("w:u1", None)  # a pane orcr did not label: unmarked
    td.add_pane("w:o1", "ghost/x")  # an agent pane no row knows: an orphan
    orcr_home.start_server()
    with orcr_home.sdk() as o:
        o.run("x", provider="testp", path="d/a", cwd="/")
        until(lambda: o.get("d/a")["status"] == "working")
        td.remove_pane(o.get("d/a")["pane_id"])  # vanishes: lost
        until(lambda: o.list("d/a") == [])  # ended (lost) a poll later
    before = until(
        lambda: (lambda s: s if s["drift"]["orphan_agent_panes"] else None)(orcr_home.status())
    )
    assert before["drift"] == {
        "lost": 1,
        "repaired": 0,
        "orphan_agent_panes": 1,
        "unmarked_panes": 1,
    }
    assert before["drift_at"]["lost"] is not None and before["drift_at"]["repaired"] is None
    assert before["drift_at"]["orphan_agent_panes"] is not None
    orcr_home.stop_server()
    orcr_home.start_server()
    after = orcr_home.status()
    assert after["pid"] != before["pid"]
    assert after["drift"] == before["drift"]
    assert after["drift_at"] == before["drift_at"]  # the pane counts did not change either
    orcr_home.kill_server()  # a crash keeps them too
    orcr_home.start_server()
    crashed = orcr_home.status()
    assert (crashed["drift"], crashed["drift_at"]) == (before["drift"], before["drift_at"])
    text = orcr_home.run("server", "status", check=True).stdout
    assert f"drift lost 1 (total, last at {before['drift_at']['lost']})  repaired 0  " in text
    # a gauge's time moves only when its value does
    td.remove_pane("w:o1")
    gone = until(
        lambda: (lambda s: s if not s["drift"]["orphan_agent_panes"] else None)(orcr_home.status())
    )
    assert gone["drift_at"]["orphan_agent_panes"] > before["drift_at"]["orphan_agent_panes"]
    assert gone["drift_at"]["unmarked_panes"] == before["drift_at"]["unmarked_panes"]


def test_repaired_count_survives_a_crash(orcr_home):
    orcr_home.config(CONFIG)
    orcr_home.start_server(extra_env={"ORCR_FAULT": "after_pane_recorded"})
    orcr_home.run("agent", "run", "--provider", "testp", "--path", "d/r", "x")
    assert orcr_home.proc.wait(30) == -signal.SIGKILL, orcr_home.server_log()
    orcr_home.start_server()  # recovery finds the recorded pane: repaired
    first = until(lambda: (lambda s: s if s["drift"]["repaired"] else None)(orcr_home.status()))
    assert first["drift"]["repaired"] == 1 and first["drift_at"]["repaired"]
    with orcr_home.sdk() as o:  # started: a crash now repairs nothing more
        until(lambda: o.get("d/r")["status"] == "working")
    orcr_home.kill_server()  # a crash, not a clean stop
    orcr_home.start_server()
    again = orcr_home.status()
    assert again["drift"]["repaired"] == 1
    assert again["drift_at"]["repaired"] == first["drift_at"]["repaired"]
    assert _explained(orcr_home) == []


def _working_agent_saved(home, short_tmp) -> tuple[Path, str]:
    """A store with one working agent and its pane, saved after a clean stop."""
    home.config(CONFIG)
    home.start_server()
    with home.sdk() as o:
        o.run("x", provider="testp", path="d/a", cwd="/")
        until(lambda: o.get("d/a")["status"] == "working")
        pane = o.get("d/a")["pane_id"]
    home.stop_server()
    saved = short_tmp / "saved"
    home.save(saved)
    return saved, pane


def _ended(o) -> bool:
    return o.list("d/a") == []


def test_a_loss_seen_live_counts_in_its_own_commit(orcr_home, short_tmp):
    """SIGKILL after each commit around a loss the monitor sees (the pane vanishes
    under a running server): the stored count always matches the events."""
    saved, pane = _working_agent_saved(orcr_home, short_tmp)
    crashes = 0
    for n in range(1, 30):
        if not orcr_home.crashed_after_commit(
            n, saved, _ended, "ended (lost)", first=lambda: td.remove_pane(pane)
        ):
            assert _explained(orcr_home) == []
            assert _stored_drift(orcr_home)["lost"] == 1
            break
        crashes += 1
        assert _explained(orcr_home) == [], f"crash after commit {n}"
    else:
        raise AssertionError("the loss never ran to the end without a crash")
    assert crashes >= 2  # at least the loss and its end


def test_a_loss_found_by_recovery_counts_in_its_own_commit(orcr_home, short_tmp):
    """The pane vanished while the server was down: recovery marks the row lost at
    start. SIGKILL after each commit: the count never parts from its event, and a
    restart after the crash never counts the loss twice."""
    saved, pane = _working_agent_saved(orcr_home, short_tmp)
    td.remove_pane(pane)
    orcr_home.save(saved)
    crashes = 0
    for n in range(1, 30):
        if not orcr_home.crashed_after_commit(n, saved, _ended, "ended (lost)"):
            assert _explained(orcr_home) == []
            assert _stored_drift(orcr_home)["lost"] == 1
            break
        crashes += 1
        assert _explained(orcr_home) == [], f"crash after commit {n}"
        orcr_home.start_server()  # recovery from the crash
        with orcr_home.sdk() as o:
            until(lambda: _ended(o), 30, "ended (lost)")
        orcr_home.stop_server()
        assert _explained(orcr_home) == [], f"recovery from commit {n}"
        assert _stored_drift(orcr_home)["lost"] == 1
    else:
        raise AssertionError("recovery never ran to the end without a crash")
    assert crashes >= 2  # at least the loss and its end
