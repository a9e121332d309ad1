"""What an idle server holds in memory (issue 39 item 4, ``bench/idle.py``)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest


@pytest.mark.skipif(
    importlib.util.find_spec("psycopg") is None, reason="psycopg not installed: nothing to keep out"
)
def test_the_server_keeps_the_postgresql_driver_peewee_would_import_out(orcr_home):
    """peewee imports psycopg whenever it is installed (~13 MiB resident); a server on
    SQLite never uses it. Its shared libraries (psycopg_binary, libpq) are the witness.

    Planted: foreground.py without ``import_peewee()`` first -> fails (psycopg mapped)."""
    proc = orcr_home.start_server()
    with orcr_home.sdk() as o:
        o.list()  # the server has served a call: its lazy imports are done
    maps = Path(f"/proc/{proc.pid}/maps").read_text()
    assert "libsqlite" in maps or "_sqlite3" in maps  # what it does use is there
    assert "psycopg" not in maps and "libpq" not in maps
