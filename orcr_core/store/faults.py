"""Fault injection for crash tests: inert unless ``ORCR_FAULT`` is set.

``ORCR_FAULT=<point>`` SIGKILLs the server the first time execution reaches
``faults.point("<point>")``; ``<point>:<n>`` at the n-th time. The points are
listed in docs/internals.md; the crash tests kill the server at each of them.

``ORCR_FAULT=disk_full@<point>[:<n>]`` raises there, once, the error SQLite gives a
write on a full disk, instead: the server lives on, as it does when a disk fills.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import threading

_SPEC = os.environ.get("ORCR_FAULT", "")
_hits: dict[str, int] = {}
_lock = threading.Lock()


def point(name: str) -> None:
    if not _SPEC:
        return
    mode, _, spec = _SPEC.rpartition("@")
    want, _, nth = spec.partition(":")
    if want != name:
        return
    with _lock:
        _hits[name] = _hits.get(name, 0) + 1
        hit = _hits[name]
    if mode == "disk_full":
        if hit == int(nth or 1):
            raise sqlite3.OperationalError("database or disk is full")
    elif hit >= int(nth or 1):
        os.kill(os.getpid(), signal.SIGKILL)
