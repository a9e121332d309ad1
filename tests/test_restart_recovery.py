"""A restart after a crash always comes back (issue 19 item 2).

Recovery used to iterate a live ``Agent.select()`` cursor while the pipelines of
the starts it repaired already ran: a pipeline that committed (its prompt was
already in, so it records ``working`` at once) left the recovery thread's read
snapshot behind, and in WAL mode its next ``BEGIN IMMEDIATE`` failed at once with
"database is locked" (the busy timeout does not apply to a stale snapshot); the
server exited with no socket. Now the rows are read into a list before the first
write and the repaired pipelines start only once recovery has finished.

The crashed state is made directly: agents whose prompt was delivered (the test
driver's pane shows it, ``working``) are set back to ``starting``, turn 0, as a
SIGKILL between the paste and ``prompt.applied`` leaves them.
"""

from __future__ import annotations

import sqlite3
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "plugins"))

from orcr_core.kit.testing import until  # noqa: E402

CONFIG = '[driver]\nname = "test"\n[timings]\npoll_every = "50ms"\nprompt_confirm = "200ms"\n'
AGENTS = 8
RESTARTS = 50


def _statuses(home) -> dict[str, str]:
    with sqlite3.connect(home.path / "store.db") as conn:
        return dict(conn.execute("SELECT path, status FROM agent"))


def _back_to_starting(home) -> None:
    """As a crash after the paste, before ``prompt.applied``, leaves each row."""
    with sqlite3.connect(home.path / "store.db") as conn:
        conn.execute("UPDATE agent SET status = 'starting', turn = 0 WHERE status != 'ended'")


def test_a_restart_with_starts_whose_pipelines_commit_during_recovery_always_succeeds(orcr_home):
    orcr_home.config(CONFIG)
    orcr_home.start_server()
    for i in range(AGENTS):
        orcr_home.run("agent", "run", "-p", "testp", "--path", f"r/a{i}", f"hi {i}", check=True)
    until(lambda: set(_statuses(orcr_home).values()) == {"working"}, 30, what="all working")
    for n in range(RESTARTS):
        orcr_home.kill_server()
        _back_to_starting(orcr_home)
        orcr_home.start_server()  # raises if the server exits before its socket opens
        until(
            lambda: set(_statuses(orcr_home).values()) == {"working"},
            30,
            what=f"restart {n}: every repaired start working again",
        )
    orcr_home.stop_server()
    assert "database is locked" not in (orcr_home.path / "server.out").read_text()
    import orcr_test_driver as td

    panes = td.read_state()["panes"]
    assert len(panes) == AGENTS, panes  # the loop below sees every agent's pane
    for pane in panes.values():
        assert len(pane["prompts"]) == 1, pane  # the prompt the transcript showed: never again


def test_recovery_survives_commits_by_another_connection_between_its_rows(tmp_path, monkeypatch):
    """Recovery's own loop: another connection commits between two rows' writes (a
    pipeline thread, another process); the next row's ``BEGIN IMMEDIATE`` must not
    fail on a read snapshot left open by the loop's query."""
    import time

    from orcr_core.agents import reconcile
    from orcr_core.contracts import PaneInfo
    from orcr_core.store import db as store_db
    from orcr_core.store import events
    from orcr_core.store.models import Agent

    store_db.open_store(tmp_path / "store.db")
    try:
        panes = []
        for i in range(4):
            Agent.create(
                uuid=f"u{i}",
                path=f"r/a{i}",
                name=f"a{i}",
                provider="testp",
                status="starting",
                cwd="/",
                pane_id=f"w:p{i}",
                tab_id=f"w:t{i}",
                workspace_id="w",
                launch_token=f"tok{i}",
                created_at=time.time(),
            )
            panes.append(
                PaneInfo(f"w:p{i}", "w", f"w:t{i}", label=f"r/a{i}", launch_token=f"tok{i}")
            )

        def commit_elsewhere():
            store_db.db.connect(reuse_if_open=True)
            with store_db.db.atomic("IMMEDIATE"):
                events.emit("test.commit", None)
            store_db.db.close()

        real_recover = reconcile._recover_starting

        def recover_starting(server, agent, pane):  # each row meets a commit made meanwhile
            t = threading.Thread(target=commit_elsewhere)
            t.start()
            t.join()
            return real_recover(server, agent, pane)

        class Driver:
            def snapshot(self):
                return panes

        class Server:
            driver = Driver()
            config = None

            def notify(self, **kw):
                pass

        monkeypatch.setattr(reconcile, "_recover_starting", recover_starting)
        monkeypatch.setattr(reconcile, "owned", lambda snap: {p.launch_token: p for p in snap})
        monkeypatch.setattr(reconcile, "_count", lambda *a, **k: None)
        resumed = reconcile.recover(Server())
        assert sorted(resumed) == ["u0", "u1", "u2", "u3"]
        kinds = [k for (k,) in store_db.db.execute_sql("SELECT kind FROM event")]
        assert kinds.count("agent.repaired") == 4 and kinds.count("test.commit") == 4
    finally:
        store_db.db.close()
