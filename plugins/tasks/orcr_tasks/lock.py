"""The queue lock: a directory, because ``mkdir``/``rename`` of a directory is
atomic on every filesystem and macOS has no ``flock``.

The lock is made complete before it exists: a private directory holding an
``owner`` file (pid, host, the process's start time) is renamed to ``.lock``,
so a lock never lacks its owner. The rename never replaces a ``.lock`` that is
already there, not even an empty one made by a script's ``mkdir .lock`` (the
playbook's own idiom), which plain ``rename(2)`` would replace: orcr waits for
a lock it did not make, and never clears it by itself. A crashed holder leaves ``.lock`` behind;
it is cleared only once its owner is shown dead (same host, and the pid gone
or reused by a process that started later). A move journaled inside the lock
(see :mod:`orcr_tasks.queue`) is finished before the lock goes.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import time
from collections.abc import Callable
from pathlib import Path

import psutil

from orcr_core.store import faults
from orcr_tasks.backend import QueueError
from orcr_tasks.files import rename_noreplace


class LockBusy(Exception):
    pass


def _start_time(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied, ValueError):
        return None


def me() -> dict:
    pid = os.getpid()
    return {"pid": pid, "host": socket.gethostname(), "started": _start_time(pid)}


def read_owner(lock: Path) -> dict | None:
    try:
        return json.loads((lock / "owner").read_text())
    except (OSError, ValueError):
        return None


def owner_alive(owner: dict | None) -> bool | None:
    """True/False when it can be told; None when it cannot (another host, no owner)."""
    if not owner or owner.get("host") != socket.gethostname():
        return None
    started = _start_time(int(owner.get("pid", -1)))
    if started is None:
        return False
    recorded = owner.get("started")
    # a reused pid belongs to a process that started after the lock's owner
    return recorded is None or abs(started - recorded) < 0.01


def describe(owner: dict | None) -> str:
    if not owner:
        return "another program (no owner file: not made by orcr, e.g. a script's `mkdir .lock`)"
    return f"pid {owner.get('pid')} on {owner.get('host')}"


class DirLock:
    def __init__(self, path: Path):
        self.path = path

    def try_acquire(self) -> bool:
        tmp = self.path.with_name(f".lock-new-{os.getpid()}-{secrets.token_hex(4)}")
        tmp.mkdir()
        try:
            (tmp / "owner").write_text(json.dumps(me()))
            try:
                rename_noreplace(tmp, self.path)
            except FileExistsError:  # somebody holds it (orcr or not)
                return False
            faults.point("tasks.lock.acquired")
            return True
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def acquire(self, timeout: float = 30.0, on_dead=None) -> None:
        """Wait for the lock. A lock whose owner is dead is cleared with ``on_dead``
        (which finishes its journaled move) by exactly one waiter."""
        deadline = time.monotonic() + timeout
        delay = 0.002
        while not self.try_acquire():
            owner = read_owner(self.path)
            if on_dead is not None and owner_alive(owner) is False:
                self.break_dead(on_dead)
                continue
            if time.monotonic() > deadline:
                alive = owner_alive(owner)
                state = {True: "alive", False: "dead", None: "of unknown state"}[alive]
                raise LockBusy(
                    f"the queue lock {self.path} is held by {describe(owner)} ({state}); "
                    "if that process is gone, run `orcr tasks unlock` on the queue"
                )
            time.sleep(delay)
            delay = min(delay * 2, 0.05)

    def break_dead(self, on_dead) -> bool:
        """Clear a dead owner's lock. ``mkdir .lock/breaking`` elects one breaker."""
        try:
            (self.path / "breaking").mkdir()
        except FileNotFoundError:
            return False  # already gone
        except FileExistsError:
            return False  # another waiter is breaking it
        if owner_alive(read_owner(self.path)) is not False:
            os.rmdir(self.path / "breaking")
            return False
        on_dead(self.path)
        dead = self.path.with_name(f".lock-dead-{secrets.token_hex(4)}")
        os.rename(self.path, dead)
        shutil.rmtree(dead, ignore_errors=True)
        return True

    def release(self) -> None:
        dead = self.path.with_name(f".lock-old-{os.getpid()}-{secrets.token_hex(4)}")
        os.rename(self.path, dead)
        shutil.rmtree(dead, ignore_errors=True)


def clear_dead(path: Path, force: bool, recover: Callable[[Path], str | None]) -> str:
    """Clear the lock at ``path`` after checking its owner is gone: ``recover(path)``
    first finishes the move the dead holder journaled (its id, or None); what was done.
    ``force`` clears a lock whose owner cannot be told (another host, no owner file)."""
    if not path.exists():
        return "the queue is not locked"
    owner = read_owner(path)
    if owner is None and not force:
        raise QueueError(
            f"{path} has no owner file, so orcr did not make it: another program (a "
            "script's `mkdir .lock`, as in the playbook) holds the queue; orcr waits for "
            "it to go. If that program is gone, remove it (rmdir) or run again with --force"
        )
    alive = owner_alive(owner)
    if alive is True:
        raise QueueError(f"the lock is held by pid {owner['pid']}, which is alive: not clearing it")
    if alive is None and not force:
        raise QueueError(
            f"cannot tell whether the lock's owner ({owner}) is gone (another host?); "
            "check by hand, then run again with --force"
        )
    (path / "breaking").mkdir(exist_ok=True)
    moved = recover(path)
    dead = path.with_name(f".lock-dead-{secrets.token_hex(4)}")
    os.rename(path, dead)
    shutil.rmtree(dead, ignore_errors=True)
    return "cleared the lock" + (f" and finished the move of {moved}" if moved else "")
