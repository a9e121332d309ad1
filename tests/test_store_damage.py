"""Issue 20 items 24 and 30: a store damaged under a running server stops it with
one clear error (logged once, ``store_corrupted``), no server starts over the
remains, no client waits without a bound, and ``doctor`` says what to do; doctor
also fails a store the server could not write.

Issue 33 item 8: the truncated store once let the next server open a fresh, empty
store (a connection opened on the emptied file deleted its -wal; the next server
took the empty file for a store not made yet): tests/test_store_never_replaced.py
shows the cause, and docs/internals.md ("Reruns") gives the 50-run loop of the
truncation case and its result. Under load a server thread logged a traceback
beside the one ``store_corrupted`` line: the notifier's match loop (3 of 7 loop runs,
both damages) and the queue worker (1 of 50 runs of the truncation case), fixed by
handing their errors to ``Server.store_error``; each was this test failing."""

from __future__ import annotations

import socket
import subprocess
import threading
import time

import pytest

from orcr_core.kit.testing import until
from orcr_core.sdk.client import Client, ServerError
from orcr_core.store import health


def _truncate(store):
    store.write_bytes(b"")


def _overwrite_header(store):
    with open(store, "r+b") as f:
        f.write(b"this is not sqlite at all" * 4)


@pytest.mark.parametrize("damage", [_truncate, _overwrite_header])
def test_a_store_damaged_under_the_server_stops_it_with_one_error(server, damage):
    server.run("agent", "run", "--provider", "testp", "--path", "d/a", "hi", check=True)
    store = server.path / "store.db"
    damage(store)
    until(lambda: server.proc.poll() is not None, 10, what="the server to stop")
    assert server.proc.returncode == 1
    log = server.server_log()
    assert log.count("store_corrupted") == 1, log
    assert "malformed" not in log and "Traceback" not in log, log
    # every client gets the error at once (no server starts over the remains)
    for args in (("agent", "ls"), ("server", "status")):
        t0 = time.monotonic()
        r = server.run(*args, timeout=30)
        assert r.returncode == 6, r
        assert "store_corrupted" in r.stderr and "orcr doctor" in r.stderr, r.stderr
        assert time.monotonic() - t0 < 20
    # the -wal is kept for a salvage; nothing was made over the damaged file
    assert (server.path / "store.db-wal").exists()
    assert health.file_problem(store) is not None
    r = server.run("doctor", "--json")
    assert r.returncode == 1
    assert '"store_corrupted' in r.stdout or "store_corrupted" in r.stdout
    assert "mv " in r.stdout and ".recover" in r.stdout


def test_a_page_damaged_under_the_server_is_refused_at_once(server):
    """The header is intact, a table's page is not: the first read of it (a request,
    or the monitor) stops the server with the same one error; no server starts."""
    import sqlite3

    server.run("agent", "run", "--provider", "testp", "--path", "d/a", "hi", check=True)
    until(lambda: server.get("d/a")["status"] == "working", 30, what="d/a started")
    store = server.path / "store.db"

    def damaged() -> bool:
        """Damage the agent table's page in the main file. A write after the checkpoint
        puts a good copy of the page in the -wal, which readers take instead (under load
        the agent's start wrote there, and the server answered from it): then again."""
        conn = sqlite3.connect(store)
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # every page in the main file
            page = conn.execute("PRAGMA page_size").fetchone()[0]
            sql = "SELECT rootpage FROM sqlite_master WHERE name = 'agent'"
            (root,) = conn.execute(sql).fetchone()
        finally:
            conn.close()
        with open(store, "r+b") as f:
            f.seek((root - 1) * page)
            f.write(b"\xff" * page)
        probe = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
        try:
            probe.execute("SELECT * FROM agent").fetchall()
            return False
        except sqlite3.DatabaseError:
            return True
        finally:
            probe.close()

    until(damaged, 20, what="the damaged page is the one a reader gets")
    t0 = time.monotonic()
    r = server.run("agent", "ls", timeout=30)
    assert r.returncode == 6 and "store_corrupted" in r.stderr, r
    assert "malformed" in r.stderr and time.monotonic() - t0 < 20
    until(lambda: server.proc.poll() is not None, 10, what="the server to stop")
    log = server.server_log()
    assert log.count("store_corrupted") == 1 and "Traceback" not in log, log


def test_a_client_never_waits_on_a_silent_server_without_a_bound(short_tmp):
    path = short_tmp / "silent.sock"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    listener.listen()
    held = []
    threading.Thread(target=lambda: held.append(listener.accept()), daemon=True).start()
    client = Client(path, autostart=False)
    client.reply_timeout = 0.5
    t0 = time.monotonic()
    with pytest.raises(ServerError) as e:
        client.connect()
    assert e.value.code == "server_not_answering" and "hello" in e.value.message
    assert time.monotonic() - t0 < 5
    listener.close()


def test_doctor_fails_a_store_the_server_cannot_write(orcr_home):
    orcr_home.start_server()
    orcr_home.run("agent", "ls", check=True)
    orcr_home.stop_server()
    store = orcr_home.path / "store.db"
    r = orcr_home.run("doctor", "--json")
    assert '"check": "store", "ok": true' in r.stdout and "writable" in r.stdout, r.stdout
    if subprocess.run(["chattr", "+i", str(store)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i needs root on a file system that supports it")
    try:
        r = orcr_home.run("doctor")
        assert r.returncode == 1, r.stdout
        assert "FAIL  store: the server cannot write its store" in r.stdout, r.stdout
        assert "chattr -i" in r.stdout and "orcr cannot run agents" in r.stdout
    finally:
        subprocess.run(["chattr", "-i", str(store)])


def test_the_exit_on_a_damaged_store_waits_for_answers_in_progress_but_not_for_ever():
    """``ANSWERING.drain``, which ``serve`` calls before its exit on a damaged store: the
    request that found the damage sends its ``store_corrupted`` first (under load the
    client once got a closed connection instead); a stream, never done, holds it 1 s."""
    from orcr_core.server.listener import _Answering

    answering, answered = _Answering(), threading.Event()
    inside = threading.Event()

    def answer() -> None:
        with answering:
            inside.set()
            time.sleep(0.3)
            answered.set()

    threading.Thread(target=answer).start()
    inside.wait(5)
    answering.drain(5.0)
    assert answered.is_set() and answering.count == 0
    with answering:  # a stream: drain gives up after its timeout
        t0 = time.monotonic()
        answering.drain(0.2)
        assert 0.2 <= time.monotonic() - t0 < 2
