"""A store file that exists is never replaced by a fresh one (issue 33 item 8).

``test_store_damage``'s truncated store once let the next server open a fresh,
empty store (once in about 60 runs). The cause, shown here: SQLite opens a
0-byte file as a new, empty database, and a connection that does so deletes the
file's -wal (even a read-only one, even with other connections open). Any
connection opened between the truncation and the server noticing it (a new
request thread, a pipeline thread) deleted the -wal; the next server then saw an
empty file with no log beside it, which ``health.file_problem`` took for "a store
not made yet", and made its tables in it.

Now a new store is made whole under a temporary name and linked into place, so an
existing store file was never empty: an empty, cut or table-less one is refused
``store_corrupted`` (with the way out), and no connection is opened on one.
"""

from __future__ import annotations

import os
import sqlite3
import threading

import pytest

from orcr_core.store import db as store_db
from orcr_core.store import health


@pytest.fixture
def fresh_db():
    yield
    store_db.close_store()


def _refused(server) -> str:
    r = server.run("agent", "ls", timeout=60)
    assert r.returncode == 6, r
    assert "store_corrupted" in r.stderr and "orcr doctor" in r.stderr, r.stderr
    return r.stderr


def test_an_empty_store_file_is_refused_and_kept(orcr_home):
    """Planted: ``file_problem`` returning None for an empty file with no -wal (the
    old "not made yet") -> fails (agent ls answers from a fresh store)."""
    orcr_home.path.mkdir(parents=True, exist_ok=True)
    store = orcr_home.path / "store.db"
    store.write_bytes(b"")
    assert "empty (0 bytes)" in _refused(orcr_home)
    assert store.stat().st_size == 0  # nothing was made in it
    r = orcr_home.run("doctor", "--json")
    assert r.returncode == 1 and "store_corrupted" in r.stdout and "mv " in r.stdout


def test_a_store_with_a_cut_header_is_refused(orcr_home):
    orcr_home.start_server()
    orcr_home.run("agent", "run", "--provider", "testp", "--path", "d/a", "hi", check=True)
    orcr_home.stop_server()
    store = orcr_home.path / "store.db"
    os.truncate(store, 10)
    assert "cut short" in _refused(orcr_home)
    assert store.stat().st_size == 10


def test_a_store_without_orcr_tables_is_refused_not_filled(orcr_home):
    """A valid SQLite file that holds no orcr tables (emptied and written again).
    Planted: ``migrate`` creating the tables in any file -> fails."""
    orcr_home.path.mkdir(parents=True, exist_ok=True)
    store = orcr_home.path / "store.db"
    conn = sqlite3.connect(store)
    conn.execute("CREATE TABLE other (x)")
    conn.commit()
    conn.close()
    assert "holds no orcr tables" in _refused(orcr_home)
    conn = sqlite3.connect(store)
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    conn.close()
    assert names == {"other"}


def test_a_new_thread_never_opens_an_emptied_store(tmp_path, fresh_db):
    """The cause of the flake: a connection opened on the emptied file deletes its
    -wal. Each thread's connection checks the file first. Planted: no check in
    ``StoreDatabase._connect`` -> fails (the -wal is gone)."""
    from orcr_core.store.models import Meta

    store = tmp_path / "store.db"
    store_db.open_store(store)
    Meta.replace(key="k", value="v").execute()
    wal = tmp_path / "store.db-wal"
    assert wal.stat().st_size > 0
    store.write_bytes(b"")
    seen = []

    def reader():
        try:
            Meta.select().count()
            seen.append("read")
        except health.StoreCorrupted as exc:
            seen.append(str(exc))

    t = threading.Thread(target=reader)  # a thread with no connection yet
    t.start()
    t.join(30)
    assert seen and "truncated to 0 bytes" in seen[0], seen
    assert wal.exists() and wal.stat().st_size > 0  # the salvage is still there


def test_a_crash_while_a_store_is_made_leaves_no_store_file(tmp_path, monkeypatch, fresh_db):
    """The store appears whole or not at all: a start that dies while it makes the
    tables leaves no store file. Planted: no ``_create`` (the tables made in
    ``store.db`` itself, as before) -> fails (a store file without its tables)."""
    store = tmp_path / "store.db"

    def crash(database):
        raise OSError("killed here")

    steps = list(store_db.MIGRATIONS)
    monkeypatch.setattr(store_db, "MIGRATIONS", [*steps[:3], ("crash", crash), *steps[3:]])
    with pytest.raises(OSError, match="killed here"):
        store_db.open_store(store)
    assert not store.exists()
    assert sorted(os.listdir(tmp_path)) == []  # the temporary file is gone too
    monkeypatch.undo()
    store_db.open_store(store)
    assert store_db.read_schema_version(store) == store_db.SCHEMA_VERSION


def test_a_killed_creation_leaves_no_temporary_file_behind(tmp_path, fresh_db):
    """A creation SIGKILLed before its link leaves ``.store.db.new-<pid>-<ns>``; the next
    creation removes it (its pid is gone) and keeps a live creator's. Planted: no
    ``_remove_dead_creations`` -> fails (the dead one's files stay)."""
    store = tmp_path / "store.db"
    dead = subprocess_pid_that_exited()
    left = [tmp_path / f".store.db.new-{dead}-1{suffix}" for suffix in ("", "-wal")]
    live = tmp_path / f".store.db.new-{os.getppid()}-2"
    for f in [*left, live]:
        f.write_bytes(b"x")
    store_db.open_store(store)
    leftovers = sorted(n for n in os.listdir(tmp_path) if n.startswith(".store.db.new-"))
    assert leftovers == [live.name]


def subprocess_pid_that_exited() -> int:
    import subprocess

    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid
