"""The journal of a folder queue's locked move, and how a dead holder's move is finished.

A locked move (:meth:`Queue.move`) writes, inside the queue lock, ``journal.json``:
first the task's new text and its notice, then, once the text is written beside the
file, the file's ctime. A holder killed half way leaves the lock and this journal;
whoever clears the dead lock calls :func:`finish` first, which completes the move
(or sees it was completed, or that the file is no longer the one journaled) and
writes its notice under the same id (:mod:`orcr_tasks.announce`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

from orcr_tasks.files import fsync_dir, write_atomic

NAME = "journal.json"


def record(lock_path: Path, data: dict) -> None:
    write_atomic(lock_path / NAME, json.dumps(data))


def clear(lock_path: Path) -> None:
    os.unlink(lock_path / NAME)


def finish(
    lock_path: Path,
    file: Callable[[str, str], Path],
    claim_ends: Callable[[str, str], None],
    notice: Callable[[dict | None], None],
) -> str | None:
    """Finish the move journaled under a dead lock: the task's id when it was moved
    now, else None. ``file(state, id)`` is a task's path, ``claim_ends(state, id)``
    runs before the rename out of ``state``, ``notice`` writes the move's notice."""
    try:
        j = json.loads((lock_path / NAME).read_text())
    except (OSError, ValueError):
        return None
    src = file(j["src"], j["id"])
    dst = file(j["dst"], j["id"])
    if dst.exists():  # renamed before the holder died: its notice may not be written
        notice(j.get("notice"))
        return None
    try:
        st = src.stat()
    except FileNotFoundError:
        return None
    if "ctime_ns" in j:
        if st.st_ctime_ns != j["ctime_ns"]:
            return None  # renamed away and claimed back since: not ours any more
    else:
        write_atomic(src, j["content"])
    claim_ends(j["src"], j["id"])
    os.rename(src, dst)
    fsync_dir(dst.parent)
    notice(j.get("notice"))
    return j["id"]
