"""Files that must survive a power loss before the store row that names them.

Seed 002: once an agent's row is inserted its identity is durable, and its
``launch.json`` is written before the insert. For that order to hold across a
power loss the file, its directory entry and the directory's own entry in its
parent reach the disk before the commit does (the commit itself is made durable
by ``synchronous = FULL``). Each is an ``fsync``: a rename or a new name lives in
the directory, not in the file.
"""

from __future__ import annotations

import os


def fsync_dir(path: str | os.PathLike) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def create_file(path: str, data: bytes, mode: int = 0o600) -> None:
    """Create ``path`` exclusively with ``data`` and fsync it (not its directory)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def make_dir_with_file(directory: str, name: str, data: bytes, sync_parent: bool = True) -> None:
    """A new 0700 ``directory`` holding one 0600 file, all of it on disk on return;
    without ``sync_parent`` all but the directory's own entry in its parent, which
    the caller syncs (once for several, as a group admission does) before it relies
    on it."""
    os.mkdir(directory, 0o700)
    create_file(os.path.join(directory, name), data)
    fsync_dir(directory)  # the file's entry
    if sync_parent:
        fsync_dir(os.path.dirname(os.path.abspath(directory)))  # the directory's entry
