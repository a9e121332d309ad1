"""File primitives the queue is built from: whole-or-nothing writes, directory
fsync, and a rename that never replaces what is already there."""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import functools
import json
import os
import secrets
import sys
from datetime import UTC, datetime
from pathlib import Path


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, text: str) -> None:
    """Write ``path`` whole or not at all: a private temp file, fsync, rename."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(3)}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


_AT_FDCWD = -100
_RENAME_NOREPLACE = 1  # Linux renameat2(2)
_RENAME_EXCL = 0x4  # macOS renamex_np(2)


@functools.cache
def _libc():
    """The C library, at the first rename: the process's own symbols first (Python
    links it), ``find_library`` only where they lack both calls. That runs
    ``ldconfig -p``, which every server start paid when this module imported."""
    try:
        own = ctypes.CDLL(None, use_errno=True)
        if hasattr(own, "renameat2") or hasattr(own, "renamex_np"):
            return own
        return ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    except OSError:
        return None


def _native(src: bytes, dst: bytes) -> int | None:
    """0 on success, an errno, or None when the system has no such call."""
    libc = _libc()
    if libc is None:
        return None
    if sys.platform == "darwin" and hasattr(libc, "renamex_np"):
        rc = libc.renamex_np(src, dst, ctypes.c_uint(_RENAME_EXCL))
    elif hasattr(libc, "renameat2"):
        rc = libc.renameat2(_AT_FDCWD, src, _AT_FDCWD, dst, ctypes.c_uint(_RENAME_NOREPLACE))
    else:
        return None
    return 0 if rc == 0 else ctypes.get_errno()


def rename_noreplace(src: Path, dst: Path) -> None:
    """``rename(src, dst)`` that fails with FileExistsError when ``dst`` exists.

    A plain rename(2) of a directory replaces an *empty* directory at ``dst``
    (and of a file, any file): ``renameat2(RENAME_NOREPLACE)`` on Linux and
    ``renamex_np(RENAME_EXCL)`` on macOS refuse instead. Where neither is
    available (or the filesystem does not support it) ``dst`` is checked first,
    which leaves a window of microseconds."""
    err = _native(os.fsencode(src), os.fsencode(dst))
    if err == 0:
        return
    if err in (errno.EEXIST, errno.ENOTEMPTY):
        raise FileExistsError(err, os.strerror(err), str(dst))
    if err not in (None, errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
        raise OSError(err, os.strerror(err), str(src))
    if os.path.lexists(dst):
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(dst))
    os.rename(src, dst)


def touch_if(path: Path, key: str, value: str) -> None:
    """Refresh ``path``'s mtime if the JSON object in it has ``key`` = ``value``, read
    and touched through one descriptor: a file written over it meanwhile (a new inode,
    as :func:`write_atomic` makes) is never touched. FileNotFoundError when absent."""
    with open(path, "rb") as f:
        try:
            data = json.loads(f.read())
        except ValueError:
            return
        if isinstance(data, dict) and data.get(key) == value:
            os.utime(f.fileno())
