"""Is the store file still a store? Cheap checks the server, its startup and
``orcr doctor`` share. Standard library only (doctor's import path).

A store destroyed under a running server (truncated, overwritten, its pages
corrupted) must stop the server with one clear error instead of a thread per
request failing forever (issue 20 item 24); a server must not start over one.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path

MAGIC = b"SQLite format 3\x00"
#: SQLITE_CORRUPT, SQLITE_NOTADB: the file is damaged (not busy, not full)
CORRUPT_CODES = (11, 26)
_CORRUPT_WORDS = ("malformed", "not a database", "file is encrypted")


class StoreCorrupted(Exception):
    code = "store_corrupted"


def what_to_do(path: Path) -> str:
    """The recovery steps ``doctor`` and the server's error name."""
    return (
        f"orcr doctor checks the store; to recover, stop the server (orcr server stop), move {path.name} and its -wal and -shm files "
        f"aside (mv {path} {path}.broken, and the same for {path.name}-wal and "
        f"{path.name}-shm), salvage what you can with sqlite3 {path}.broken .recover, then "
        "run orcr again: it starts a new, empty store"
    )


def file_problem(path: Path, running: bool = False) -> str | None:
    """Why ``path`` is not an SQLite store, or None. An absent file is a store not
    made yet (None), unless ``running`` (a server has it open). An empty file is
    always damage: orcr makes a store whole under another name and links it into
    place (``orcr_core.store.db``), so a store file that exists was never empty
    (issue 33 item 8: SQLite opens a 0-byte file as a new, empty database, and
    deletes its -wal, so an empty file must never be opened)."""
    try:
        size = os.stat(path).st_size
    except FileNotFoundError:
        return f"{path} was deleted while the server ran" if running else None
    except OSError as exc:
        return f"{path} cannot be read: {exc.strerror or exc}"
    if size == 0:
        wal = path.with_name(path.name + "-wal")
        if running:
            return f"{path} was truncated to 0 bytes while the server ran"
        if wal.exists() and wal.stat().st_size > 0:
            return f"{path} is empty (0 bytes) but its write-ahead log {wal.name} is not: it was truncated"
        return f"{path} is empty (0 bytes): a store orcr made is never empty; it was truncated"
    try:
        head = _header(path, running)
    except OSError as exc:
        return f"{path} cannot be read: {exc.strerror or exc}"
    if len(head) < len(MAGIC):
        return f"{path} is cut short ({len(head)} bytes): its header is incomplete"
    if head != MAGIC:
        return f"{path} is not an SQLite database (its header was overwritten)"
    return None


#: fds on the store a running server reads the header through, never closed:
#: closing any fd of a file drops every POSIX lock the process holds on it, so
#: an open()/close() beside SQLite's own connections would release their locks;
#: another process's connection could then checkpoint and delete the -wal under
#: the server (a malformed store).
_HELD: dict[str, int] = {}


def _header(path: Path, running: bool) -> bytes:
    if not running:  # doctor, startup: no SQLite connection of ours is open yet
        with open(path, "rb") as f:
            return f.read(len(MAGIC))
    fd = _HELD.get(str(path))
    if fd is None or os.fstat(fd).st_ino != os.stat(path).st_ino:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)  # a replaced file: the old fd stays
        _HELD[str(path)] = fd
    return os.pread(fd, len(MAGIC), 0)


def corruption(exc: BaseException | None) -> str | None:
    """The SQLite error text when ``exc`` (or what it wraps: peewee keeps the
    sqlite3 error as its first argument) says the file is damaged, else None."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, sqlite3.DatabaseError):
            text = str(exc)
            code = getattr(exc, "sqlite_errorcode", None)
            if code in CORRUPT_CODES or any(w in text for w in _CORRUPT_WORDS):
                return text
        inner = exc.args[0] if exc.args and isinstance(exc.args[0], BaseException) else None
        exc = inner or exc.__cause__ or exc.__context__
    return None


def writable_problem(path: Path) -> str | None:
    """Why the store (or its -wal or -shm file) cannot be opened for writing, or None."""
    for p in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        if not p.exists():
            continue
        try:
            fd = os.open(p, os.O_RDWR)
        except OSError as exc:
            return f"{p} cannot be opened for writing: {exc.strerror or exc}"
        os.close(fd)
    return None


#: SQLITE_FULL
FULL_CODE = 13
_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)


def disk_full(exc: BaseException | None, store: Path) -> str | None:
    """``disk full: <dir>`` when ``exc`` (or what it wraps or was raised while
    handling) says a disk is full: a write that failed with ENOSPC/EDQUOT names its
    file's directory, SQLite's ``database or disk is full`` the store's; else None."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in _FULL_ERRNOS:
            where = os.path.dirname(str(exc.filename)) if exc.filename else str(store.parent)
            return f"disk full: {where} ({exc.strerror or 'no space left on device'})"
        if isinstance(exc, sqlite3.DatabaseError) and (
            getattr(exc, "sqlite_errorcode", None) == FULL_CODE or "disk is full" in str(exc)
        ):
            return f"disk full: {store.parent} (the store {store.name} cannot grow)"
        inner = exc.args[0] if exc.args and isinstance(exc.args[0], BaseException) else None
        exc = inner or exc.__cause__ or exc.__context__
    return None
