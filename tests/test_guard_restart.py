"""The stuck-start guard after a server restart (docs/decisions.md): a ``starting``
agent recovery picks up counts its ``timings.max_starting`` from the restart, not
from its last progress before the server went down, so a long downtime (a night,
a reboot) does not fail the start before its resumed pipeline could move.

The server is SIGKILLed mid-start (``ORCR_FAULT``), the row's timestamps are aged
by two hours as if it had stayed down that long, and the restarted server's
multiplexer is slow (``ORCR_TEST_PROMPT_DELAY``) or down for a while, so the
monitor sees the row while it is still ``starting``."""

from __future__ import annotations

import signal
import sqlite3
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "plugins"))
import orcr_test_driver as td  # noqa: E402

from orcr_core.kit.testing import until  # noqa: E402

CONFIG = (
    '[driver]\nname = "test"\n[timings]\npoll_every = "50ms"\nprompt_confirm = "200ms"\n'
    'max_starting = "1m"\n'
)
DOWNTIME = 7200.0  # two hours: far past timings.max_starting


def _crash_mid_start(home, point: str) -> dict:
    home.config(CONFIG)
    home.start_server(extra_env={"ORCR_FAULT": point})
    home.run("agent", "run", "-p", "testp", "--path", "g/a", "hi")  # may lose the reply
    assert home.proc.wait(30) == -signal.SIGKILL, home.server_log()
    return _row(home)


def _age(home, seconds: float) -> None:
    """As if the server had been down ``seconds``: every timestamp of the row is older."""
    with sqlite3.connect(home.path / "store.db") as conn:
        conn.execute(
            "UPDATE agent SET created_at = created_at - :d, started_at = started_at - :d, "
            "last_progress_at = last_progress_at - :d WHERE path = 'g/a'",
            {"d": seconds},
        )


def _row(home) -> dict:
    conn = sqlite3.connect(home.path / "store.db")
    conn.row_factory = sqlite3.Row
    try:
        return dict(conn.execute("SELECT * FROM agent WHERE path = 'g/a'").fetchone())
    finally:
        conn.close()


def _kinds(home, uuid: str) -> list[str]:
    return [e["kind"] for e in home.events(uuid)]


def test_a_repaired_start_after_a_long_downtime_is_not_failed_by_the_guard(orcr_home):
    row = _crash_mid_start(orcr_home, "after_pane_recorded")
    assert row["status"] == "starting" and row["pane_id"]
    _age(orcr_home, DOWNTIME)
    restarted = time.time()
    orcr_home.start_server(extra_env={"ORCR_TEST_PROMPT_DELAY": "2"})
    got = until(lambda: (r := _row(orcr_home))["status"] != "starting" and r, 30, what="settled")
    assert (got["status"], got["exit_reason"]) == ("working", None), got
    assert got["last_progress_at"] >= restarted  # the guard counted from the restart
    kinds = _kinds(orcr_home, row["uuid"])
    assert "agent.guard_restarted" in kinds and "agent.repaired" in kinds
    assert kinds.index("agent.guard_restarted") < kinds.index("agent.repaired")
    guard = next(e for e in orcr_home.events(row["uuid"]) if e["kind"] == "agent.guard_restarted")
    assert guard["data"]["progress_before"] <= restarted - DOWNTIME + 60
    (pane,) = td.read_state()["panes"].values()  # the same pane, the prompt typed once
    assert pane["prompts"] == ["hi"]


def test_a_start_whose_multiplexer_is_down_at_restart_waits_a_full_guard(orcr_home):
    """Recovery cannot look (the multiplexer is down when the server starts): the row
    stays starting, its guard counted from the restart; once the multiplexer answers
    the pipeline goes on."""
    row = _crash_mid_start(orcr_home, "after_pane_recorded")
    _age(orcr_home, DOWNTIME)
    td.set_down(True)
    orcr_home.start_server()
    with orcr_home.sdk() as o:
        until(lambda: o.status()["driver"]["error"], 30, what="the driver reported down")
        until(lambda: "agent.guard_restarted" in _kinds(orcr_home, row["uuid"]), 30)
        td.set_down(False)
        got = until(lambda: (a := o.get("g/a"))["status"] != "starting" and a, 30)
    assert (got["status"], got["exit_reason"]) == ("working", None), got
    (pane,) = td.read_state()["panes"].values()
    assert pane["prompts"] == ["hi"]


def test_the_guard_still_fails_a_start_that_makes_no_progress_after_the_restart(orcr_home):
    """The guard is restarted, not disabled: a pipeline that hangs after the restart
    still fails after timings.max_starting."""
    _crash_mid_start(orcr_home, "after_pane_recorded")
    _age(orcr_home, DOWNTIME)
    orcr_home.config(CONFIG.replace('max_starting = "1m"', 'max_starting = "2s"'))
    restarted = time.time()
    orcr_home.start_server(extra_env={"ORCR_TEST_PROMPT_DELAY": "30"})
    got = until(lambda: (r := _row(orcr_home))["status"] == "ended" and r, 30, what="failed")
    assert got["exit_reason"] == "failed" and "stuck-start guard" in got["error"]
    assert got["ended_at"] >= restarted + 2.0  # a full guard after the restart, not at once


def test_only_unblocked_starting_rows_have_their_guard_restarted(tmp_path):
    """A start blocked on a dialog keeps its timings.dialog_wait clock (the question
    was on the screen, answerable, all along); rows in other statuses are untouched."""
    import json

    from orcr_core.agents import reconcile
    from orcr_core.store import db as store_db
    from orcr_core.store.models import Agent, Event

    store_db.open_store(tmp_path / "store.db")
    try:
        old = time.time() - DOWNTIME

        def row(path: str, status: str, **kw) -> Agent:
            return Agent.create(
                uuid=f"u-{path}",
                path=f"g/{path}",
                name=path,
                provider="testp",
                status=status,
                cwd="/",
                created_at=old,
                started_at=old,
                last_progress_at=old,
                **kw,
            )

        row("plain", "starting")
        row("asked", "starting", blocked_reason="trust this folder?", blocked_at=old)
        row("busy", "working")
        before = time.time()
        assert reconcile.restart_guards() == 1
        rows = {a.name: a for a in Agent.select()}
        assert rows["plain"].last_progress_at >= before
        assert rows["asked"].last_progress_at == old and rows["asked"].blocked_at == old
        assert rows["busy"].last_progress_at == old
        (ev,) = Event.select().where(Event.kind == "agent.guard_restarted")
        assert ev.agent == "u-plain" and json.loads(ev.data)["progress_before"] == old
    finally:
        store_db.close_store()
