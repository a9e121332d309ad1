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
import threading
from concurrent.futures import ThreadPoolExecutor


def _fsync(path: str | os.PathLike, flags: int) -> None:
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: str | os.PathLike) -> None:
    _fsync(path, os.O_RDONLY | os.O_DIRECTORY)


def fsync_file(path: str | os.PathLike) -> None:
    _fsync(path, os.O_RDONLY)


def create_file(path: str, data: bytes, mode: int = 0o600, sync: bool = True) -> None:
    """Create ``path`` exclusively with ``data`` and fsync it (not its directory);
    ``sync=False`` leaves the fsync to the caller (:func:`sync_dirs_with_file`)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def make_dir_with_file(directory: str, name: str, data: bytes, sync: bool = True) -> None:
    """A new 0700 ``directory`` holding one 0600 file, all of it on disk on return.

    ``sync=False`` only writes them: the caller makes the file, the directory and
    the directory's entry in its parent durable before it relies on them, with
    :func:`sync_dirs_with_file` (once for several, as a group admission does)."""
    os.mkdir(directory, 0o700)
    create_file(os.path.join(directory, name), data, sync=sync)
    if sync:
        fsync_dir(directory)  # the file's entry
        fsync_dir(os.path.dirname(os.path.abspath(directory)))  # the directory's entry


#: fsyncs of a group, in flight together: a journaling filesystem (ext4's jbd2, xfs)
#: folds fsyncs that arrive while it commits into its next commit, so N files cost
#: far fewer than N journal commits (bench/admission.py, docs/internals.md)
_POOL_SIZE = 8
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(_POOL_SIZE, thread_name_prefix="orcr-fsync")
        return _pool


def _sync_pairs(pairs: list[tuple[str, str]]) -> None:
    for path, directory in pairs:
        fsync_file(path)
        fsync_dir(directory)


def sync_dirs_with_file(directories: list[str], name: str) -> None:
    """Make what :func:`make_dir_with_file` wrote with ``sync=False`` durable, for
    several directories of one parent at once: each file and each directory is
    fsynced, by up to ``_POOL_SIZE`` threads at once (one task per thread: a task
    per fsync costs more Python than a tmpfs fsync), then the parent once. Raises
    the first failure."""
    if not directories:
        return
    pairs = [(os.path.join(d, name), d) for d in directories]
    if len(pairs) == 1:
        _sync_pairs(pairs)
    else:
        k = min(_POOL_SIZE, len(pairs))
        for f in [_executor().submit(_sync_pairs, pairs[i::k]) for i in range(k)]:
            f.result()
    fsync_dir(os.path.dirname(os.path.abspath(directories[0])))
