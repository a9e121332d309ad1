"""Activities: long-running processes that work for orcr on this machine without being
agents, shown by ``orcr top`` beside the agents (docs/top.md, "Landers and other
activities"; part of the plugin kit, docs/plugins/kit.md). The first is the lander of
``orcr tasks land``: its queue, the branch it lands on, the task it
holds and its step.

A process publishes what it does as one small JSON file in the data directory's
``activities/`` (written whole: a temp file renamed over it) and removes it when it
ends. No server is involved: a lander needs none, and a file outlives a server
restart. A process killed outright leaves its file behind; readers skip (and remove)
every file whose process is gone, told by its pid *and* that process's start time, so
a reused pid never passes for it. ``orcr top`` reads the directory once a second.
"""

from __future__ import annotations

import json
import os
import re
import socket
import time
from pathlib import Path

from orcr_core.dirs import data_dir

#: what a file name may hold besides the pid: the kind and the name, made safe
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def activities_dir() -> Path:
    return data_dir() / "activities"


def _started(pid: int) -> float | None:
    """The process's start time (seconds since the epoch), None when it is gone."""
    import psutil

    try:
        return psutil.Process(pid).create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied, ValueError):
        return None


class Activity:
    """This process's activity file: :meth:`update` rewrites it, :meth:`close` removes
    it. ``kind`` says what it is (``lander``), ``name`` which one (the queue)."""

    def __init__(self, kind: str, name: str, **fields) -> None:
        self.pid = os.getpid()
        safe = _UNSAFE.sub("_", f"{kind}-{name}")[:80]
        self.path = activities_dir() / f"{safe}-{self.pid}.json"
        self.data = {
            "kind": kind,
            "name": name,
            "pid": self.pid,
            "pid_started": _started(self.pid),
            "host": socket.gethostname(),
            "since": time.time(),
        }
        self.update(**fields)

    def update(self, **fields) -> None:
        """Rewrite the file; a failed write is dropped (showing the work in ``orcr top``
        must never stop it: a read-only data directory, a full disk)."""
        self.data.update(fields, updated=time.time())
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps(self.data))
            os.replace(tmp, self.path)
        except OSError:
            pass

    def close(self) -> None:
        try:
            self.path.unlink(missing_ok=True)
        except OSError:
            pass

    def __enter__(self) -> Activity:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def read_activities(prune: bool = True) -> list[dict]:
    """The activities whose process is alive, oldest first; the files of dead ones are
    removed (``prune``)."""
    found = []
    try:
        entries = sorted(activities_dir().glob("*.json"))
    except OSError:
        return []
    for path in entries:
        try:
            data = json.loads(path.read_text())
            pid, started = int(data["pid"]), data.get("pid_started")
        except (OSError, ValueError, KeyError, TypeError):
            continue  # being replaced, or not ours
        now_started = _started(pid)
        alive = now_started is not None and (
            started is None or abs(now_started - float(started)) < 1.0
        )
        if not alive:
            if prune:
                try:
                    path.unlink(missing_ok=True)
                except OSError:
                    pass
            continue
        found.append(data)
    return sorted(found, key=lambda a: a.get("since") or 0)


def activity_line(a: dict) -> str:
    """``lander demo → main: T3 check · landed 2, failed 1 · pid 4242``."""
    head = f"{a.get('kind', '?')} {a.get('name', '?')}"
    if a.get("onto"):
        head += f" → {a['onto']}"
    doing = a.get("task")
    doing = f"{doing} {a.get('step') or ''}".rstrip() if doing else a.get("step") or "idle"
    parts = [f"{head}: {doing}"]
    counts = a.get("counts") or {}
    if counts:
        parts.append(", ".join(f"{k} {v}" for k, v in counts.items()))
    parts.append(f"pid {a.get('pid')}")
    return " · ".join(parts)
