"""The server lock, ``run/server.lock``: one server per data directory.

The server holds an exclusive ``flock`` on it for its whole life and writes its
pid there, then ``listening`` once its socket is bound, and ``stopping`` once it
has begun to stop. A client that finds no socket asks the lock who holds it, so
it can tell "a server is starting" (wait) from "a server is stopping" (wait for
it to go) from "a server runs but its socket is gone" (say so at once), and
``server stop`` can find the pid when the socket cannot. Import-light: the CLI's client
path uses it.
"""

from __future__ import annotations

import fcntl
import os
import time
from dataclasses import dataclass
from pathlib import Path

from orcr_core import dirs

#: how long a server retries a lock another process holds: a client's probe
#: holds it for microseconds, a server for its whole life
ACQUIRE_RETRY = 0.5


@dataclass
class Holder:
    pid: int | None
    listening: bool
    stopping: bool = False
    #: the socket it listens on (from ``mark_listening``), None before it listens
    socket: str | None = None


def path() -> Path:
    return dirs.run_dir() / "server.lock"


def holder(lock: Path | None = None) -> Holder | None:
    """Who holds the lock (None: nobody, the lock file is free or absent)."""
    lock = lock or path()
    try:
        fd = os.open(lock, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            words = os.pread(fd, 4096, 0).decode(errors="replace").split()
            pid = int(words[0]) if words and words[0].isdigit() else None
            listening = words[1:2] == ["listening"]
            sock = " ".join(words[2:]) if listening and len(words) > 2 else None
            return Holder(pid, "listening" in words[1:], "stopping" in words[1:], sock)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def acquire(lock: Path) -> int | None:
    """Take the lock for this process: its fd, or None when another server holds it."""
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    deadline = time.monotonic() + ACQUIRE_RETRY
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() >= deadline:
                os.close(fd)
                return None
            time.sleep(0.01)
    write(fd, f"{os.getpid()}\n")
    return fd


def write(fd: int, text: str) -> None:
    os.ftruncate(fd, 0)
    os.pwrite(fd, text.encode(), 0)


def mark_listening(fd: int, socket_path: Path) -> None:
    write(fd, f"{os.getpid()} listening {socket_path}\n")


def mark_stopping(fd: int) -> None:
    write(fd, f"{os.getpid()} stopping\n")


def is_current(fd: int, lock: Path) -> bool:
    """Is ``lock`` still the file ``fd`` holds (not deleted, not replaced)?"""
    try:
        st = os.stat(lock)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino)


def pid_gone(pid: int) -> bool:
    """Has process ``pid`` exited (a zombie counts: it runs nothing, holds no lock)?"""
    import psutil

    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True
