"""Where a queue may live, and how its directory names its agents."""

from __future__ import annotations

import hashlib
import re
import socket
from pathlib import Path

from orcr_core import dirs
from orcr_core.dirs import synced_by


def unsafe_location(path: Path) -> str | None:
    """Why ``path`` must not hold a queue, or None."""
    path = path.resolve()
    for parent in (path, *path.parents):
        if (parent / ".git").exists():
            return (
                f"{path} is inside the git worktree {parent}: each worktree has its own copy "
                "of repo files, so a queue there splits into copies"
            )
        if (parent / ".jj").exists():
            return f"{path} is inside the jj workspace {parent}: a queue there splits into copies"
        if (parent / ".obsidian").is_dir():
            return (
                f"{path} is inside the Obsidian vault {parent}: Obsidian Sync breaks atomic "
                "renames and creates conflict copies"
            )
        if (parent / ".dropbox").exists() or (parent / ".dropbox.cache").exists():
            return f"{path} is inside the Dropbox folder {parent}: sync breaks atomic renames"
    service = synced_by(path)
    if service is None:
        return None
    return (
        f"{path} is inside a folder synced by {service}: sync services break atomic "
        "renames and create conflict copies"
    )


def _short_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:8]


def readable(name: str, limit: int = 64) -> str:
    """The part of ``name`` that is already an orcr path segment (``[a-z0-9_]``)."""
    return re.sub(r"[^a-z0-9_]+", "_", name.lower()).strip("_")[:limit].rstrip("_")


def agent_segment(name: str) -> str:
    """A task id as one orcr path segment: itself when it already is one
    (``[a-z0-9_]``, at most 64), else its readable part plus a short hash of the
    whole id, so ids that differ only in case or punctuation never share one."""
    if re.fullmatch(r"[a-z0-9_]{1,64}", name) and not name.startswith("_"):
        return name
    return f"{readable(name, 55) or 't'}_{_short_hash(name)}"


def queue_segment(root: Path) -> str:
    """A queue directory as one orcr path segment: the readable part of its name
    plus a short hash of its absolute path, so two queues never share one."""
    return f"{readable(root.name, 55) or 'q'}_{_short_hash(str(root))}"


def whereabouts() -> dict:
    """What a claim records of where its agent runs: the host, and the orcr instance
    (its id and data directory) that the worker's agents are started under."""
    return {
        "host": socket.gethostname(),
        "orcr": dirs.instance_id(),
        "orcr_data": str(dirs.data_dir()),
    }
