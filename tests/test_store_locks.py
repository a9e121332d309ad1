"""Another process may open the store while the server runs (sqlite3, a test's
helper, a script): the server must never release SQLite's POSIX locks by
opening and closing the store file itself (closing any fd of a file drops the
process's locks on it), or that process's connection, believing itself the
last, checkpoints and deletes the -wal under the server: a malformed store."""

from __future__ import annotations

import sqlite3
import time

from orcr_core.kit.testing import until


def test_an_outside_connection_never_corrupts_the_store_of_a_running_server(server):
    time.sleep(1.2)  # the server has checked its store file a few times
    for i in range(3):
        conn = sqlite3.connect(server.path / "store.db")
        with conn:
            conn.execute("UPDATE meta SET value = value WHERE key = 'schema_version'")
        conn.close()
        server.run("agent", "run", "--provider", "testp", "--path", f"w/a{i}", "x", check=True)
        time.sleep(0.6)
        res = server.run("agent", "ls", "--all", "--json")
        assert res.returncode == 0, res.stderr
    assert "store_corrupted" not in server.server_log()
    assert until(lambda: server.run("agent", "ls", "--json").stdout.count('"path"') == 3)
