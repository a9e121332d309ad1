"""Durable state before side effects (seed 002): SIGKILL the server right after
each COMMIT along one agent's whole life and check, on the store the crash left,
that every change is durable together with what must go with it:

* an agent row never exists without its ``launch.json`` (written before the
  insert: the queue worker may start the pipeline, which reads it, at once);
* every change has its event, written in the same transaction (``agent.queued``
  with the row, ``agent.status`` with each status, the pane/session/prompt
  events with the fields they describe).

The fault point ``after_commit`` fires in the store's ``commit()``, so a write
moved after its transaction (launch.json after the insert, an event after the
change) is exactly what a crash there loses.
"""

from __future__ import annotations

import shutil
import sqlite3
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "plugins"))
import orcr_test_driver as td  # noqa: E402

from orcr_core.kit.testing import until  # noqa: E402
from orcr_core.sdk.client import ServerError  # noqa: E402
from orcr_core.store.db import SCHEMA_VERSION  # noqa: E402


def _connect(home) -> sqlite3.Connection:
    """Read-only, so a look never makes the store file: a crash while a new store is
    migrated leaves none (it is made under a temporary name), and sqlite3.connect would
    create an empty one that the next server rightly refuses as damaged."""
    return sqlite3.connect(f"file:{home.path / 'store.db'}?mode=ro", uri=True)


def _store(home) -> tuple[list[dict], list[dict]]:
    if not (home.path / "store.db").exists():  # killed while a new store was migrated
        return [], []
    conn = _connect(home)
    conn.row_factory = sqlite3.Row
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        if not {"agent", "event"} <= tables:  # killed while migrating a new store
            return [], []
        rows = [dict(r) for r in conn.execute("SELECT * FROM agent")]
    finally:
        conn.close()
    return rows, home.events()


def check_durable_together(home) -> list[str]:
    """What the store says must agree with itself and with the data dir."""
    rows, evs = _store(home)
    problems = []
    for row in rows:
        uuid, mine = row["uuid"], [e for e in evs if e["agent"] == row["uuid"]]
        kinds = [e["kind"] for e in mine]
        if not (home.path / "agents" / uuid / "launch.json").is_file():
            problems.append(f"{row['path']}: a row without launch.json")
        if "agent.queued" not in kinds:
            problems.append(f"{row['path']}: a row without its agent.queued event")
        moves = [e["data"]["to"] for e in mine if e["kind"] == "agent.status"]
        if (moves[-1] if moves else "queued") != row["status"]:
            problems.append(f"{row['path']}: status {row['status']}, events say {moves}")
        pairs = [
            ("workspace_id", "pane.workspace_applied"),
            ("pane_id", "pane.start_applied"),
        ]
        for field, kind in pairs:
            if bool(row[field]) != (kind in kinds):
                problems.append(f"{row['path']}: {field}={row[field]!r} but {kind} in {kinds}")
        if (row["turn"] >= 1) != ("prompt.applied" in kinds):
            problems.append(f"{row['path']}: turn {row['turn']} but events {kinds}")
    for e in evs:
        if e["kind"] == "agent.queued" and e["agent"] not in {r["uuid"] for r in rows}:
            problems.append(f"an agent.queued event for no row: {e}")
    return problems


def _life(home, path: str) -> bool:
    """One agent from admission to ended; False as soon as the server is dead."""
    dead = lambda: home.proc.poll() is not None  # noqa: E731

    def step(cond, what):
        return until(lambda: dead() or cond(), 30, what) and not dead()

    try:
        with home.sdk() as o:
            o.run("hi", provider="testp", path=path, cwd="/")
            if not step(lambda: o.get(path)["status"] == "working", "working"):
                return False
            td.set_status(o.get(path)["pane_id"], "idle")
            if not step(lambda: o.get(path)["status"] == "idle", "idle"):
                return False
            o.kill(path)
            return step(lambda: o.list(path) == [], "ended")
    except (OSError, ServerError):  # the reply was lost to the crash
        home.proc.wait(10)
        return False


def _fresh_store(home, template: Path | None = None) -> None:
    """Back to a blank data dir (the config stays), or to ``template``'s store: each run
    counts commits from 1."""
    for name in ("store.db", "store.db-wal", "store.db-shm", "testdriver.json"):
        (home.path / name).unlink(missing_ok=True)
    shutil.rmtree(home.path / "agents", ignore_errors=True)
    if template is not None:
        for f in template.iterdir():
            shutil.copy2(f, home.path / f.name)


def _schema(home) -> tuple[int, int]:
    """The store's recorded schema version and how many migrations it recorded."""
    conn = _connect(home)
    try:
        meta = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        done = conn.execute("SELECT COUNT(*) FROM _orcr_migrations").fetchone()[0]
    finally:
        conn.close()
    return int(meta[0]), done


def _crash_at_each_commit(home, template: Path | None, life: bool) -> int:
    """SIGKILL after commit 1, 2, ... until a run survives; checks the store after each
    crash and after the recovery from it. Returns how many crashes there were."""
    crashes = 0
    for n in range(1, 200):
        _fresh_store(home, template)
        home.start_server(extra_env={"ORCR_FAULT": f"after_commit:{n}"}, wait=False)
        try:
            home.wait_socket()
            survived = _life(home, "d/a") if life else home.proc.poll() is None
        except RuntimeError:  # died while starting: a commit of startup itself
            survived = False
        if survived:
            home.stop_server()
            return crashes
        assert home.proc.wait(10) == -9, home.server_log()
        crashes += 1
        assert check_durable_together(home) == [], f"crash after commit {n}"
        # recovery from that crash keeps it so
        home.start_server()
        with home.sdk() as o:
            until(lambda: all(a["status"] not in ("queued", "starting") for a in o.list()), 30)
        home.stop_server()
        assert check_durable_together(home) == [], f"recovery from commit {n}"
        assert _schema(home) == (SCHEMA_VERSION, SCHEMA_VERSION), f"recovery from commit {n}"
    raise AssertionError("the run never reached its end without a crash")


def test_sigkill_after_each_migration_commit_leaves_a_store_that_migrates(orcr_home):
    """A new store's start: one commit per migration, each its own transaction."""
    crashes = _crash_at_each_commit(orcr_home, None, life=False)
    assert crashes >= SCHEMA_VERSION


def test_sigkill_after_every_commit_keeps_state_and_its_evidence_together(orcr_home, tmp_path):
    """One agent's life on a migrated store (the migrations are the test above's)."""
    _fresh_store(orcr_home)
    orcr_home.start_server()
    orcr_home.stop_server()
    template = tmp_path / "store"
    template.mkdir()
    for name in ("store.db", "store.db-wal", "store.db-shm"):
        if (orcr_home.path / name).exists():
            shutil.copy2(orcr_home.path / name, template / name)
    crashes = _crash_at_each_commit(orcr_home, template, life=True)
    assert crashes >= 8  # admission, promotion, workspace, pane, prompt, idle, ended


def test_the_check_catches_a_row_without_launch_json_or_an_event(orcr_home):
    """The checker bites: a row whose launch.json or event went missing fails it."""
    orcr_home.start_server()
    with orcr_home.sdk() as o:
        a = o.run("hi", provider="testp", path="c/one", cwd="/")
        until(lambda: o.get("c/one")["status"] == "working", 30)
    orcr_home.stop_server()
    assert check_durable_together(orcr_home) == []
    (orcr_home.path / "agents" / a["uuid"] / "launch.json").unlink()
    conn = sqlite3.connect(orcr_home.path / "store.db")
    with conn:
        conn.execute("DELETE FROM event WHERE kind = 'prompt.applied'")
    conn.close()
    problems = check_durable_together(orcr_home)
    assert any("launch.json" in p for p in problems)
    assert any("turn 1" in p for p in problems)
