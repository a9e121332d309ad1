"""``orcr doctor``'s store row: present, not newer than this orcr, an SQLite file
whose header is intact, writable (the store, its -wal and -shm), and passing
SQLite's integrity check. Every failure names what to do.

Import-light: sqlite3 and orcr_core.store.health (standard library only); the
schema reader is imported inside.
"""

from __future__ import annotations

from pathlib import Path

QUICK_CHECK_OVER = 256 * 1024 * 1024  # bytes: a larger store gets quick_check


def check_store(d) -> None:
    """Add the ``store`` row to the doctor ``d`` (``d.can_run`` False on a failure)."""
    from orcr_core import dirs
    from orcr_core.store import health
    from orcr_core.store.db import SCHEMA_VERSION, read_schema_version

    path = dirs.store_path()

    def fail(detail: str, fix: str) -> None:
        d.can_run = False
        d.add("store", "fail", detail, fix)

    why = health.file_problem(path)
    if why:
        return fail(f"the store is damaged: {why} [store_corrupted]", health.what_to_do(path))
    try:
        found = read_schema_version(path)
    except Exception as exc:  # not an SQLite file, unreadable, ...
        return fail(f"{path} cannot be read: {exc}", health.what_to_do(path))
    if found is None and not path.exists():
        d.add("store", "ok", f"{path}: no store yet (created at first use)")
        return
    if found is not None and found > SCHEMA_VERSION:
        return fail(
            f"{path} has schema version {found}, newer than this orcr understands "
            f"({SCHEMA_VERSION}) [store_version_mismatch]",
            "upgrade orcr (pip install -U orcr)",
        )
    why = health.writable_problem(path)
    if why:
        return fail(
            f"the server cannot write its store: {why}",
            f"make it writable again (chmod u+w {path}; lsattr {path} shows an immutable "
            f"'i' flag, chattr -i {path} removes it), or point ORCR_HOME elsewhere",
        )
    if found is None:  # a store orcr made always has its tables (store.db._create)
        return fail(
            f"the store is damaged: {path} holds no orcr tables [store_corrupted]",
            health.what_to_do(path),
        )
    problems, how = _integrity(path)
    if problems:
        return fail(
            f"{path} fails PRAGMA {how}: " + "; ".join(problems[:3]),
            health.what_to_do(path),
        )
    if found < SCHEMA_VERSION:
        d.add(
            "store",
            "ok",
            f"{path}: schema {found}, migrated to {SCHEMA_VERSION} when the server "
            f"starts; {how} ok; writable",
        )
    else:
        d.add("store", "ok", f"{path}: schema {found}; {how} ok; writable")


def _integrity(path: Path) -> tuple[list[str], str]:
    """``PRAGMA integrity_check`` over a read-only connection (``quick_check`` for
    a store over QUICK_CHECK_OVER bytes: it skips matching indexes to rows)."""
    import sqlite3

    from orcr_core.store.db import read_only_connection

    how = "quick_check" if path.stat().st_size > QUICK_CHECK_OVER else "integrity_check"
    try:
        conn = read_only_connection(path)
        try:
            rows = [r[0] for r in conn.execute(f"PRAGMA {how}").fetchall()]
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        return [str(exc)], how
    return ([] if rows == ["ok"] else rows), how
