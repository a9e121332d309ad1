"""An OpenCode database built the way the CLI writes it (its 1.18.33 schema), for the
reader's tests: rows from a captured fixture, or written one at a time."""

from __future__ import annotations

import itertools
import json
import sqlite3
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SCHEMA = (FIXTURES / "schema-1.18.33.sql").read_text()


class Store:
    """One OpenCode database in WAL mode, as the CLI keeps it."""

    def __init__(self, path: Path, version: str = "1.18.33"):
        self.path = path
        self.conn = sqlite3.connect(path, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.executescript(SCHEMA)
        self.version = version
        self.session = "ses_test0001"
        self._ids = itertools.count(1)

    @property
    def wal(self) -> str:
        return str(self.path) + "-wal"

    def id(self, prefix: str) -> str:
        return f"{prefix}_{next(self._ids):012d}"

    def add_session(self, sid: str | None = None, parent: str | None = None) -> str:
        sid = sid or self.session
        self.conn.execute(
            "INSERT INTO session (id, project_id, parent_id, slug, directory, title, version, "
            "time_created, time_updated) VALUES (?, 'global', ?, 'slug', '/w', 't', ?, ?, ?)",
            (sid, parent, self.version, next(self._ids), 0),
        )
        return sid

    def message(self, data: dict, mid: str | None = None, session: str | None = None) -> str:
        mid = mid or self.id("msg")
        self.conn.execute(
            "INSERT OR REPLACE INTO message (id, session_id, time_created, time_updated, data) "
            "VALUES (?, ?, 0, 0, ?)",
            (mid, session or self.session, json.dumps(data)),
        )
        return mid

    def part(self, mid: str, data: dict, session: str | None = None) -> str:
        pid = self.id("prt")
        self.conn.execute(
            "INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) "
            "VALUES (?, ?, ?, 0, 0, ?)",
            (pid, mid, session or self.session, json.dumps(data)),
        )
        return pid

    def prompt(self, text: str, synthetic: bool = False) -> str:
        mid = self.message({"role": "user", "time": {"created": 1}, "agent": "build"})
        self.part(mid, {"type": "text", "text": text, **({"synthetic": True} if synthetic else {})})
        return mid

    def answer(self, user: str, text: str | None = None, finish: str | None = "stop",
               error: dict | None = None, tokens: dict | None = None, tool: dict | None = None,
               mid: str | None = None) -> str:  # fmt: skip
        data = {"role": "assistant", "parentID": user, "modelID": "fake-chat",
                "providerID": "fake", "time": {"created": 1},
                "tokens": tokens or {"input": 100, "output": 10, "reasoning": 0,
                                     "cache": {"read": 0, "write": 0}}}  # fmt: skip
        if finish:
            data["finish"] = finish
            data["time"]["completed"] = 2
        if error:
            data["error"] = error
            data["time"]["completed"] = 2
        mid = self.message(data, mid)
        self.part(mid, {"type": "step-start"})
        if tool:
            self.part(mid, {"type": "tool", "tool": "bash", "callID": "call_1", "state": tool})
        if text is not None:
            self.part(mid, {"type": "text", "text": text})
        return mid

    @staticmethod
    def rows(fixture: str) -> dict:
        """A captured fixture (``fixtures/<name>.json``): its rows per table."""
        return json.loads((FIXTURES / fixture).read_text())

    def insert(self, table: str, row: dict) -> None:
        cols = ", ".join(row)
        marks = ", ".join("?" for _ in row)
        self.conn.execute(f"INSERT INTO {table} ({cols}) VALUES ({marks})", tuple(row.values()))

    def load(self, fixture: str) -> None:
        """Every row of a captured fixture."""
        rows = self.rows(fixture)
        for table in ("session", "message", "part"):
            for row in rows[table]:
                self.insert(table, row)


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "opencode.db")
    yield s
    s.conn.close()
