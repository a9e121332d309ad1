"""A folder queue's heartbeats: ``hb/<id>``, one file per claim, whose mtime is the
claim's last sign of life (the reaper's clock, :mod:`orcr_tasks.moves`).

The file is keyed by task, not by claim: it names the claim's ``token``, so a touch
or a note from an old claim never freshens the next one's (``files.touch_if``).
When it may be removed is the queue's rule (:meth:`Queue.drop_heartbeat`).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from orcr_tasks.files import now_iso, touch_if, write_atomic


def path(root: Path, task_id: str) -> Path:
    return root / "hb" / task_id


def write(root: Path, task_id: str, info: dict) -> None:
    write_atomic(path(root, task_id), json.dumps(dict(info, at=now_iso())) + "\n")


def touch(root: Path, task_id: str, token: str | None = None) -> None:
    if token is None:
        os.utime(path(root, task_id))
    else:  # only the very file that names the token (files.touch_if)
        touch_if(path(root, task_id), "token", token)


def read(root: Path, task_id: str) -> dict | None:
    try:
        hb = json.loads(path(root, task_id).read_text())
    except (OSError, ValueError):
        return None
    return hb if isinstance(hb, dict) else None


def drop(root: Path, task_id: str) -> None:
    try:
        os.unlink(path(root, task_id))
    except FileNotFoundError:
        pass


def age(root: Path, task_id: str, claimed: Path, now: float | None = None) -> float:
    """Seconds since the last sign of life: the heartbeat's mtime, else (a claimer
    killed before writing it) the claim itself, the rename having set ``claimed``'s
    ctime."""
    now = time.time() if now is None else now
    for p, attr in ((path(root, task_id), "st_mtime"), (claimed, "st_ctime")):
        try:
            return now - getattr(p.lstat(), attr)
        except FileNotFoundError:
            continue
    return 0.0
