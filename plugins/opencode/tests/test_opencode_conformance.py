"""OpenCode runs the provider suite (orcr_testing.conformance.ProviderSuite) on the
databases and screens the real OpenCode 1.18.33 wrote (test_opencode_fixtures.py).

Its transcript is no appended file but a SQLite database in WAL mode: a fixture
(``real-*.json``) holds its rows, written here into a database of the CLI's own schema
(``fixtures/schema-1.18.33.sql``) at once, or a row at a time in the order the CLI
wrote them; the reader opens its ``-wal`` file, as orcr finds it."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from orcr_opencode import OpenCodeProvider
from orcr_testing.conformance import ProviderSuite

FIXTURES = Path(__file__).resolve().parent / "fixtures"
TURNS = [
    ("completed", "Hi there from fake", None),
    ("completed", "Thought it over", None),
    ("completed", "made the file", None),
    ("errored", None, None),
    ("interrupted", None, None),
]


class TestOpenCodeConformance(ProviderSuite):
    provider = OpenCodeProvider
    fixtures = FIXTURES
    transcripts = "real-*.json"
    truth = {
        "real-1.18.33-turns.json": ("1.18.33", "idle", TURNS),
        "real-1.18.33-refused.json": ("1.18.33", "idle", [
            ("completed", "A slowly streamed answer", None),
            ("interrupted", None, None),
        ]),
    }  # fmt: skip
    launch_options = {"argv": ["opencode"]}
    screens = {
        "1.18.33-ready.txt": "ready",
        "1.18.33-ready-after-turn.txt": "ready",
        "1.18.33-booting.txt": "unknown",
        "1.18.33-working.txt": "unknown",
        "1.18.33-permission-bash.txt": "dialog",
    }

    def written(self, fixture: Path, where: Path) -> str:
        pieces = self.written_in_pieces(fixture, where, None)
        path = next(pieces)
        for _ in pieces:
            pass
        return path

    def written_in_pieces(self, fixture: Path, where: Path, cut: int | None) -> Iterator[str]:
        """The session row, then the messages and parts ``cut`` rows at a time in the
        order written (``None``: all at once). The connection stays open, as the CLI's
        does: closing the last one would fold the WAL into the database."""
        conn = sqlite3.connect(where / "opencode.db", isolation_level=None)
        self._open = [*getattr(self, "_open", []), conn]
        conn.execute("PRAGMA journal_mode = WAL")
        conn.executescript((FIXTURES / "schema-1.18.33.sql").read_text())
        rows = json.loads(fixture.read_text())
        _insert(conn, "session", rows["session"][0])
        yield str(where / "opencode.db-wal")
        written = sorted(
            [("message", r) for r in rows["message"]] + [("part", r) for r in rows["part"]],
            key=lambda e: (e[1]["time_created"], e[0] == "part"),
        )
        step = cut or len(written)
        for at in range(0, len(written), step):
            for table, row in written[at : at + step]:
                _insert(conn, table, row)
            yield str(where / "opencode.db-wal")


def _insert(conn: sqlite3.Connection, table: str, row: dict) -> None:
    marks = ", ".join("?" for _ in row)
    conn.execute(f"INSERT INTO {table} ({', '.join(row)}) VALUES ({marks})", tuple(row.values()))
