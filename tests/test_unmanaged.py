"""Unmanaged discovery (seed 002, issue 10 item 7): agents herdr detects in the
user's other herdr sessions are rows keyed by (session, terminal id), kept
current on each reconciliation pass, ended when their terminal disappears, and
never acted on. The other session is a schema-checked emulator (``mux.other_session``)."""

from __future__ import annotations

import json
import sqlite3

import pytest

from orcr_core.kit.testing import until

#: herdr only: the tmux driver has no other sessions to look into
HERDR_ONLY = pytest.mark.parametrize("live", ["herdr", "herdr08"], indirect=True)
FAST = '[timings]\npoll_every = "50ms"\nreconcile_every = "200ms"\n'


def _config(home, extra: str = "") -> None:
    home.config(home.mux.config() + FAST + extra)


def _unmanaged(home, all_: bool = False) -> dict[str, dict]:
    args = ["agent", "ls", "--unmanaged", "--json"] + (["--all"] if all_ else [])
    rows = json.loads(home.run(*args, check=True).stdout)
    return {r["pane_id"]: r for r in rows}


def _store_rows(home) -> list[tuple]:
    conn = sqlite3.connect(home.path / "store.db")
    try:
        return conn.execute(
            "SELECT session, terminal_id, status, ended_at IS NOT NULL FROM unmanaged_agent "
            "ORDER BY id"
        ).fetchall()
    finally:
        conn.close()


def _only_read(emu) -> None:
    """orcr asked the user's session for snapshots and nothing else."""
    assert {r["method"] for r in emu.requests} <= {"session.snapshot"}


@pytest.mark.herdr_08
def test_unmanaged_agents_appear_update_and_end(live, short_tmp):
    work = live.mux.other_session("work")
    claude = work.add_agent("claude", "working", cwd=str(short_tmp), label="my review")
    codex = work.add_agent("codex", "idle")
    shell = work.add_agent("claude")
    work.exit_agent(shell)  # a plain shell: not an agent
    _config(live)
    live.start_server()
    if live.mux.kind == "tmux":
        from orcr_tmux.driver import TmuxDriver

        assert not hasattr(TmuxDriver, "discover")  # tmux reports none
        live.run("agent", "run", "--provider", "echo", "--path", "t/a", "hi", check=True)
        live.run("agent", "wait", "t/a", "--timeout", "30s", check=True)  # passes go by
        assert _unmanaged(live, all_=True) == {}
        assert live.status()["unmanaged"] == 0
        assert "unmanaged" not in live.run("server", "status", check=True).stdout
        return
    rows = until(
        lambda: (lambda r: r if len(r) == 2 else None)(_unmanaged(live)), what="discovered"
    )
    assert sorted(rows) == sorted([claude, codex])
    c = rows[claude]
    assert (c["session"], c["terminal_id"], c["kind"], c["status"]) == (
        "work",
        work.pane(claude).terminal_id,
        "claude",
        "working",
    )
    assert (c["cwd"], c["label"], c["ended_at"]) == (str(short_tmp), "my review", None)
    assert (rows[codex]["kind"], rows[codex]["status"], rows[codex]["label"]) == (
        "codex",
        "idle",
        None,
    )
    # the default list is orcr's own agents only
    assert json.loads(live.run("agent", "ls", "--all", "--json", check=True).stdout) == []
    assert live.status()["unmanaged"] == 2
    assert "unmanaged 2 " in live.run("server", "status", check=True).stdout
    table = live.run("agent", "ls", "--unmanaged", check=True).stdout.splitlines()
    assert table[0].split() == [
        "SESSION",
        "TERMINAL",
        "KIND",
        "STATUS",
        "PANE",
        "CWD",
        "LABEL",
        "AGE",
    ]
    assert any(
        line.split()[:4] == ["work", c["terminal_id"], "claude", "working"] for line in table
    )

    # kept current: herdr's status and session pointer
    work.set_agent_status(claude, "idle")
    work.set_agent_session(claude, "sess-42")
    c = until(
        lambda: (lambda r: r if r["agent_session"] else None)(_unmanaged(live)[claude]),
        what="claude's row updated",
    )
    assert c["status"] == "idle"
    assert c["agent_session"] == {"source": "herdr:claude", "kind": "id", "value": "sess-42"}

    # its terminal disappears: ended, kept in --all
    work.close_pane(codex)
    until(lambda: codex not in _unmanaged(live), what="codex ended")
    gone = _unmanaged(live, all_=True)[codex]
    assert gone["status"] == "ended" and gone["ended_at"] is not None
    assert live.status()["unmanaged"] == 1

    # the whole session stops: every terminal in it is gone
    work.stop()
    until(lambda: _unmanaged(live) == {}, what="the stopped session's agents ended")
    kinds = [e["kind"] for e in live.events() if e["kind"].startswith("unmanaged.")]
    assert kinds.count("unmanaged.discovered") == 2
    assert kinds.count("unmanaged.ended") == 2
    assert "unmanaged.updated" in kinds
    ended = [e for e in live.events() if e["kind"] == "unmanaged.ended"]
    assert {e["data"]["terminal_id"] for e in ended} == {r["terminal_id"] for r in rows.values()}
    assert all(e["agent"] is None for e in ended)  # not an orcr agent
    _only_read(work)


@HERDR_ONLY  # the tmux driver discovers nothing (see the test above)
def test_a_silent_session_keeps_its_rows(live):
    """A session that accepts but does not answer says nothing about its terminals."""
    work = live.mux.other_session("work")
    pane = work.add_agent("claude", "working")
    _config(live)
    live.start_server()
    until(lambda: list(_unmanaged(live)) == [pane], what="discovered")
    work.mute()
    until(lambda: work.muted_connections >= 3, what="discovery passes against the silent session")
    assert list(_unmanaged(live)) == [pane]
    work.unmute()
    work.close_pane(pane)
    until(lambda: _unmanaged(live) == {}, what="ended once the session answers again")


@HERDR_ONLY  # the tmux driver discovers nothing (see the test above)
def test_unmanaged_rows_survive_a_server_restart(live):
    work = live.mux.other_session("work")
    stays = work.add_agent("claude", "working")
    leaves = work.add_agent("codex", "idle")
    _config(live)
    live.start_server()
    before = until(
        lambda: (lambda r: r if len(r) == 2 else None)(_unmanaged(live)), what="discovered"
    )
    assert sorted(before) == sorted([stays, leaves])
    snapshots = len(work.requests)
    live.kill_server()  # SIGKILL
    live.start_server()  # nothing changed meanwhile: the same rows, no event
    until(lambda: len(work.requests) > snapshots, what="a discovery pass after the restart")
    assert _unmanaged(live) == before
    assert len(_store_rows(live)) == 2
    live.kill_server()
    work.close_pane(leaves)  # while no server runs
    arrives = work.add_agent("codex", "working")
    live.start_server()
    after = until(
        lambda: (lambda r: r if arrives in r else None)(_unmanaged(live)), what="reconciled"
    )
    assert sorted(after) == sorted([stays, arrives])
    assert after[stays] == before[stays]  # the same row, untouched
    rows = _store_rows(live)
    assert len(rows) == 3 and len({(s, t) for s, t, *_ in rows}) == 3  # never duplicated
    kinds = [e["kind"] for e in live.events() if e["kind"].startswith("unmanaged.")]
    assert kinds == ["unmanaged.discovered"] * 2 + ["unmanaged.ended", "unmanaged.discovered"]
    _only_read(work)


@HERDR_ONLY  # the tmux driver discovers nothing (see the test above)
def test_kill_all_gc_and_reconciliation_never_touch_unmanaged_agents(live):
    work = live.mux.other_session("work")
    theirs = [work.add_agent("claude", "idle"), work.add_agent("codex", "working")]
    # no GC until the kill is done (a slow machine may take > 1s to get there)
    _config(live, 'gc_after = "1h"\n')  # within FAST's [timings]
    live.start_server()
    until(lambda: sorted(_unmanaged(live)) == sorted(theirs), what="discovered")
    live.run("agent", "run", "--provider", "echo", "--path", "m/a", "one", check=True)
    live.run("agent", "run", "--provider", "echo", "--path", "m/b", "two", check=True)
    live.run("agent", "wait", "m/a", "--timeout", "30s", check=True)
    # kill everything orcr manages
    out = json.loads(live.run("agent", "kill", "**", "--yes", "--json", check=True).stdout)
    assert sorted(k["path"] for k in out) == ["m/a", "m/b"]
    live.run("config", "set", "timings.gc_after", "1s", check=True)
    # GC: an idle managed agent past gc_after ends; the unmanaged ones stay
    live.run("agent", "run", "--provider", "echo", "--path", "m/gc", "three", check=True)
    until(
        lambda: live.get("m/gc")["exit_reason"] == "gc",
        what="m/gc collected",
    )
    # reconciliation passes after a restart
    live.kill_server()
    snapshots = len(work.requests)
    live.start_server()
    until(lambda: len(work.requests) > snapshots + 1, what="discovery passes after the restart")
    rows = _unmanaged(live)
    assert sorted(rows) == sorted(theirs)
    assert [rows[p]["status"] for p in theirs] == ["idle", "working"]
    for p in theirs:
        work.pane(p)  # still there (KeyError if orcr had closed it)
        assert work.inputs(p) == []  # nothing was typed into it
    _only_read(work)
    # a verb given an unmanaged agent's key finds no orcr agent
    key = rows[theirs[0]]["terminal_id"]
    res = live.run("agent", "kill", key)
    assert res.returncode != 0 and "no agent" in res.stderr
    assert live.run("agent", "ls", "m", "--unmanaged").returncode == 2


# -- the store side, without a server -------------------------------------------


@pytest.fixture
def store(tmp_path):
    from orcr_core.store import db as store_db

    store_db.open_store(tmp_path / "store.db")
    yield
    store_db.close_store()


def _agent(terminal: str, status: str = "idle", session: str = "work"):
    from orcr_core.contracts import UnmanagedAgent

    return UnmanagedAgent(session, terminal, "claude", status, pane_id=f"w1:{terminal}")


def test_a_steady_world_writes_nothing(store):
    from orcr_core.agents import unmanaged
    from orcr_core.store.models import db

    assert unmanaged.apply({"work": [_agent("t1")]}) == 1
    writes = db.write_transactions
    assert unmanaged.apply({"work": [_agent("t1")]}) == 0
    assert db.write_transactions == writes  # no write transaction at all


def test_a_terminal_seen_again_is_revived_not_doubled(store):
    from orcr_core.agents import unmanaged
    from orcr_core.store.models import Unmanaged

    unmanaged.apply({"work": [_agent("t1")]})
    unmanaged.apply({})  # the session looked gone
    assert [u.status for u in unmanaged.rows(all=True)] == ["ended"]
    unmanaged.apply({"work": [_agent("t1", "working")]})
    (row,) = Unmanaged.select()
    assert (row.status, row.ended_at) == ("working", None)


def test_a_driver_without_discover_reports_none(store):
    """Rows left by an earlier herdr driver end under tmux: nothing keeps them current."""
    from types import SimpleNamespace

    from orcr_core.agents import unmanaged

    unmanaged.apply({"work": [_agent("t1"), _agent("t2")]})
    server = SimpleNamespace(driver=SimpleNamespace(name="tmux"))
    assert unmanaged.discover(server) == 2
    assert unmanaged.live_count() == 0
    assert unmanaged.discover(SimpleNamespace(driver=None)) is None  # no driver: no look


def test_a_broken_discovery_changes_nothing(store):
    """A user's session answering something odd never stops the reconciliation pass."""
    from types import SimpleNamespace

    from orcr_core.agents import unmanaged

    unmanaged.apply({"work": [_agent("t1")]})

    def odd():
        raise KeyError("terminal_id")

    assert unmanaged.discover(SimpleNamespace(driver=SimpleNamespace(discover=odd))) is None
    assert unmanaged.live_count() == 1


def _ended_terminals() -> list[str]:
    from orcr_core.store.models import Unmanaged

    rows = Unmanaged.select().where(Unmanaged.ended_at.is_null(False)).order_by(Unmanaged.id)
    return [u.terminal_id for u in rows]


def test_only_the_newest_ended_rows_are_kept(store):
    """Retention: ended rows beyond the newest ``keep`` are deleted by the pass that
    ends a row, in its transaction and with an ``unmanaged.pruned`` event; live rows
    are never pruned, so the table stays within live terminals + keep however many
    terminals come and go."""
    from orcr_core.agents import unmanaged
    from orcr_core.store.models import Event, Unmanaged

    live = [_agent("keep")]
    for i in range(6):  # one terminal at a time comes and goes
        unmanaged.apply({"work": [*live, _agent(f"t{i}")]}, keep=2)
        unmanaged.apply({"work": live}, keep=2)
        assert Unmanaged.select().count() <= len(live) + 2
    assert _ended_terminals() == ["t4", "t5"]  # the newest two ended
    assert [u.terminal_id for u in unmanaged.rows()] == ["keep"]  # live: untouched
    pruned = [e for e in Event.select().where(Event.kind == "unmanaged.pruned")]
    assert len(pruned) == 4 and all(json.loads(e.data)["count"] == 1 for e in pruned)


def test_a_lowered_limit_prunes_on_the_next_pass(store):
    from orcr_core.agents import unmanaged
    from orcr_core.store.models import db

    unmanaged.apply({"work": [_agent("t1"), _agent("t2"), _agent("t3")]}, keep=10)
    unmanaged.apply({"work": [_agent("t3")]}, keep=10)
    assert _ended_terminals() == ["t1", "t2"]
    writes = db.write_transactions
    assert unmanaged.apply({"work": [_agent("t3")]}, keep=2) == 0  # within the limit
    assert db.write_transactions == writes  # a steady world still writes nothing
    unmanaged.apply({"work": [_agent("t3")]}, keep=0)  # nothing changed but the limit
    assert _ended_terminals() == [] and unmanaged.live_count() == 1


def test_discovery_applies_the_configured_retention(store, monkeypatch, tmp_path):
    """``unmanaged.keep_ended`` from the config is what a discovery pass keeps."""
    from types import SimpleNamespace

    from orcr_core import config as config_mod
    from orcr_core.agents import unmanaged

    monkeypatch.setenv("ORCR_HOME", str(tmp_path))
    (tmp_path / "config.toml").write_text("[unmanaged]\nkeep_ended = 1\n")
    cfg = config_mod.load()
    assert cfg.get("unmanaged.keep_ended") == 1
    world = {"work": [_agent("t1"), _agent("t2")]}
    server = SimpleNamespace(config=cfg, driver=SimpleNamespace(discover=lambda: world))
    assert unmanaged.discover(server) == 2
    world = {"work": []}
    assert unmanaged.discover(server) == 2
    assert len(_ended_terminals()) == 1
