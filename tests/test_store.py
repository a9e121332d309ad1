"""The store: migrations, schema version refusal, IMMEDIATE serialisation, partial index."""

from __future__ import annotations

import hashlib
import sqlite3
import threading

import pytest
from peewee import IntegrityError

from orcr_core.store import db as store_db
from orcr_core.store.models import Agent, db


@pytest.fixture
def store(short_tmp):
    path = short_tmp / "store.db"
    store_db.open_store(path)
    yield path
    store_db.close_store()


def test_blank_store_migrates_and_records(store):
    conn = sqlite3.connect(store)
    names = [r[0] for r in conn.execute("SELECT name FROM _orcr_migrations ORDER BY rowid")]
    assert names == [n for n, _ in store_db.MIGRATIONS]
    v = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0]
    assert int(v) == store_db.SCHEMA_VERSION
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_newer_store_is_refused_untouched(short_tmp):
    path = short_tmp / "store.db"
    store_db.open_store(path)
    store_db.close_store()
    conn = sqlite3.connect(path)
    conn.execute(
        "UPDATE meta SET value = ? WHERE key = 'schema_version'",
        (str(store_db.SCHEMA_VERSION + 1),),
    )
    conn.commit()
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    files = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in short_tmp.iterdir()}
    mtimes = {p.name: p.stat().st_mtime_ns for p in short_tmp.iterdir()}
    with pytest.raises(store_db.StoreVersionMismatch) as e:
        store_db.open_store(path)
    assert e.value.code == "store_version_mismatch" and "upgrade orcr" in str(e.value)
    assert {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in short_tmp.iterdir()
    } == files
    assert {p.name: p.stat().st_mtime_ns for p in short_tmp.iterdir()} == mtimes


def _make_newer(path):
    """A store written by a future orcr: a schema version this one does not know."""
    store_db.open_store(path)
    store_db.close_store()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE meta SET value = '999' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()


def test_server_refuses_newer_store(orcr_home):
    path = orcr_home.path / "store.db"
    _make_newer(path)
    before = path.read_bytes()
    proc = orcr_home.start_server(wait=False)
    assert proc.wait(30) == 1
    assert "store_version_mismatch" in orcr_home.server_log()
    assert path.read_bytes() == before


def _agent(path, status="queued", seq=1):
    return dict(
        uuid=f"u-{path}-{seq}",
        path=path,
        name=path,
        provider="p",
        status=status,
        queue_seq=seq,
        cwd="/",
        created_at=0.0,
    )


def test_partial_unique_index_on_active_path(store):
    Agent.create(**_agent("a", "ended", 1))
    Agent.create(**_agent("a", "ended", 2))  # ended rows never collide
    Agent.create(**_agent("a", "working", 3))
    with pytest.raises(IntegrityError):
        Agent.create(**_agent("a", "lost", 4))  # lost keeps the path reserved


def test_immediate_serialises_read_then_write(store):
    """Two connections each read max(queue_seq) then insert max+1: no duplicate seqs."""
    errors = []

    def worker(k):
        try:
            db.connect(reuse_if_open=True)
            for i in range(50):
                with db.atomic("IMMEDIATE"):
                    n = Agent.select().count()
                    Agent.create(**_agent(f"t{k}_{i}", "queued", n + 1))
            db.close()
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    seqs = [a.queue_seq for a in Agent.select()]
    assert sorted(seqs) == list(range(1, 151))


def test_cli_names_why_an_autostarted_server_failed(orcr_home):
    path = orcr_home.path / "store.db"
    _make_newer(path)
    r = orcr_home.run("agent", "ls")
    assert r.returncode == 6
    assert "store_version_mismatch" in r.stderr and "upgrade orcr" in r.stderr


def test_a_store_from_before_turn_outcomes_gains_the_columns(short_tmp):
    """0006 adds agent.turn_status/turn_error to a store made before it, keeping rows."""
    path = short_tmp / "store.db"
    store_db.open_store(path)
    store_db.close_store()
    conn = sqlite3.connect(path)
    conn.execute("ALTER TABLE agent DROP COLUMN turn_status")
    conn.execute("ALTER TABLE agent DROP COLUMN turn_error")
    conn.execute("DELETE FROM _orcr_migrations WHERE name = '0006_agent_turn_outcome'")
    conn.execute(
        "INSERT INTO agent (uuid, path, name, provider, status, cwd, created_at, managed, "
        "cancel_requested, turn, turns_done) VALUES ('u1', 'a', 'a', 'echo', 'idle', '/', 0, 1, 0, 1, 1)"
    )
    conn.commit()
    conn.close()
    store_db.open_store(path)
    try:
        row = Agent.get(Agent.uuid == "u1")
        assert (row.path, row.turn_status, row.turn_error) == ("a", None, None)
    finally:
        store_db.close_store()


def test_a_savepoint_in_a_group_undoes_only_its_own_writes(store):
    """write_or_savepoint (admission inside the listener's group commit): a failure
    after its writes rolls back those writes alone; the group's others commit, and
    a later savepoint of the same name works. Planted: no ROLLBACK TO -> fails."""
    from orcr_core.store import events

    with db.atomic("IMMEDIATE"):
        with db.write_or_savepoint("admit"):
            events.emit("t.kept", None, n=1)
        with pytest.raises(RuntimeError):
            with db.write_or_savepoint("admit"):
                events.emit("t.undone", None, n=2)
                raise RuntimeError("after the writes")
        with db.write_or_savepoint("admit"):
            events.emit("t.kept", None, n=3)
    with db.write_or_savepoint("admit"):  # no transaction open: its own BEGIN IMMEDIATE
        events.emit("t.kept", None, n=4)
    conn = sqlite3.connect(store)
    kinds = conn.execute("SELECT kind, data FROM event WHERE kind LIKE 't.%' ORDER BY seq")
    assert [k for k, _ in kinds] == ["t.kept"] * 3


def test_get_by_id_from_compiled_sql_is_peeweees_row(store):
    """``get_by_id`` runs SQL compiled once per model, and returns what peewee's own
    returns: every field converted (bools, None), nothing dirty, DoesNotExist when
    there is no row. Planted: raw column values (no python_value) -> managed is 1,
    not True -> fails; the dirty set not cleared -> fails."""
    from peewee import Model

    with db.atomic():
        a = Agent.create(uuid="u1", path="p/a", name="a", provider="echo", status="queued",
                         queue_seq=1, cwd="/", launch_token="t", created_at=1.5, managed=True)  # fmt: skip
    for _ in range(2):  # compiled at the first call, reused at the second
        ours, theirs = Agent.get_by_id(a.id), Model.get_by_id.__func__(Agent, a.id)
        assert {k: (type(v), v) for k, v in ours.__data__.items()} == {
            k: (type(v), v) for k, v in theirs.__data__.items()
        }
        assert type(ours.managed) is bool and ours.error is None and not ours._dirty
    with pytest.raises(Agent.DoesNotExist):
        Agent.get_by_id(a.id + 1)
    assert Agent.get_or_none(Agent.id == a.id + 1) is None


def test_select_compiled_reads_the_rows_as_they_are_now(store):
    """The monitor's reload after every write runs SQL compiled once: the same rows
    peewee's select gives, re-read each call (the SQL is kept, never the rows).
    Planted: the rows cached with the SQL -> the second read misses b -> fails."""

    def build():
        return Agent.select().where(Agent.status.in_(("working", "idle"))).order_by(Agent.id)

    def add(uuid, status):
        with db.atomic():
            Agent.create(uuid=uuid, path=f"p/{uuid}", name=uuid, provider="echo",
                         status=status, queue_seq=len(uuid), cwd="/", launch_token="t",
                         created_at=1.0, managed=True)  # fmt: skip

    add("a", "working")
    add("q", "queued")
    assert [r.uuid for r in Agent.select_compiled("t", build)] == ["a"]
    add("bb", "idle")
    ours = Agent.select_compiled("t", build)
    assert [r.__data__ for r in ours] == [r.__data__ for r in build()]
    assert [r.uuid for r in ours] == ["a", "bb"] and not any(r._dirty for r in ours)


def test_get_by_one_column_from_compiled_sql(store):
    """``Model.get(Model.field == value)`` (an agent by uuid, by path) runs SQL
    compiled once per field and returns peewee's row; other shapes go to peewee.
    Planted: one cache entry for every field -> the path lookup runs the uuid's
    SQL -> DoesNotExist -> fails."""
    from peewee import Model

    with db.atomic():
        for i in (1, 2):
            Agent.create(uuid=f"u{i}", path=f"p/a{i}", name="a", provider="echo",
                         status="queued", queue_seq=i, cwd="/", launch_token="t",
                         created_at=1.5, managed=True)  # fmt: skip
    ours = Agent.get(Agent.uuid == "u2")
    assert ours.__data__ == Model.get.__func__(Agent, Agent.uuid == "u2").__data__
    assert not ours._dirty
    assert Agent.get(Agent.path == "p/a1").uuid == "u1"
    assert Agent.get_or_none(Agent.uuid == "u3") is None
    assert Agent.get_or_none(Agent.error.is_null() & (Agent.queue_seq == 2)).uuid == "u2"
    assert Agent.get_or_none(Agent.error == None).uuid in ("u1", "u2")  # noqa: E711 (IS NULL)


def test_events_since_in_plain_sql_is_the_models_view(store):
    """``events.since`` and ``last_seq`` (read after every write by the notifier and
    each follower) in plain SQL: the rows peewee's Event model gives, oldest first,
    from after the cursor, at most ``limit``. Planted: ORDER BY seq DESC -> fails."""
    from orcr_core.store import events
    from orcr_core.store.models import Event

    assert events.last_seq() == 0 and events.since(0) == []
    with db.atomic():
        for i in range(5):
            events.emit("agent.status", f"u{i % 2}", loop="l" if i == 3 else None, n=i)
    rows = Event.select().where(Event.seq > 1).order_by(Event.seq).limit(3)
    assert events.since(1, limit=3) == [events.row_to_dict(r) for r in rows]
    assert [e["data"]["n"] for e in events.since(1, limit=3)] == [1, 2, 3]
    assert events.last_seq() == 5


def test_update_where_from_compiled_sql_writes_what_peewee_writes(store):
    """``update_where`` (every state change's UPDATE) runs SQL written once per set of
    columns: the row ends as peewee's own UPDATE leaves it (bools, None, floats through
    ``db_value``), the status guard holds (0 rows when it moved on), and a query node
    goes through peewee. Planted: one cache entry for every set of columns -> the
    second set writes the first's columns -> fails."""
    with db.atomic():
        for i in (1, 2):
            Agent.create(uuid=f"u{i}", path=f"p/a{i}", name="a", provider="echo",
                         status="queued", queue_seq=i, cwd="/", launch_token="t",
                         created_at=1.5, managed=True, turn=0)  # fmt: skip
    a, b = Agent.get(Agent.uuid == "u1"), Agent.get(Agent.uuid == "u2")
    for fields in ({"status": "starting", "started_at": 2.5}, {"managed": False, "error": None}):
        with db.atomic():
            assert Agent.update_where(fields, a.id) == 1
            Agent.update(**fields).where(Agent.id == b.id).execute()
        ours, theirs = Agent.get_by_id(a.id).__data__, Agent.get_by_id(b.id).__data__
        assert {k: v for k, v in ours.items() if k not in ("id", "uuid", "path", "queue_seq")} == {
            k: v for k, v in theirs.items() if k not in ("id", "uuid", "path", "queue_seq")
        }
    assert Agent.get_by_id(a.id).managed is False
    with db.atomic():
        assert Agent.update_where({"status": "working"}, a.id, status="queued") == 0
        assert Agent.update_where({"status": "working"}, a.id, status="starting") == 1
        assert Agent.update_where({"turn": Agent.turn + 2}, a.id, status="working") == 1
    assert (Agent.get_by_id(a.id).status, Agent.get_by_id(a.id).turn) == ("working", 2)
