"""Transcript growth from the filesystem's change notifications (inotify on Linux).

One inotify instance for the whole server (``inotify_simple``, see
docs/decisions.md), one watch per directory holding a watched transcript, one
thread reading events. A notification is a hint: the monitor then polls that
agent's reader, which reads what was appended. An agent whose transcript cannot
be watched (no inotify on this platform, the kernel's watch limit reached, the
directory gone) is polled every ``timings.poll_every`` instead, so nothing
depends on notifications arriving; an overflowed event queue wakes every agent.

``ORCR_WATCH_LIMIT=<n>`` (tests) makes the watcher refuse watches past the
n-th as the kernel does at ``fs.inotify.max_user_watches`` (``ENOSPC``);
``0`` turns notifications off entirely.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
from collections.abc import Callable

log = logging.getLogger("orcr.fswatch")

try:  # Linux only; elsewhere every transcript is polled
    from inotify_simple import INotify
    from inotify_simple import flags as _flags

    MASK = (
        _flags.MODIFY
        | _flags.CREATE
        | _flags.MOVED_TO
        | _flags.DELETE
        | _flags.DELETE_SELF
        | _flags.MOVE_SELF
    )
    _OVERFLOW = _flags.Q_OVERFLOW
    _IGNORED = _flags.IGNORED
except (ImportError, OSError):  # pragma: no cover - non-Linux
    INotify = None


def _own_libc() -> None:
    """inotify_simple finds libc with ``ctypes.util.find_library``, which runs
    ``ldconfig -p`` (a fork of the whole server at every start); the process's own
    symbols have ``inotify_init1`` already. Its module-level ``_libc`` (inotify_simple
    1.x-2.x, pinned) is set first; left alone where the symbols lack it."""
    import ctypes

    import inotify_simple

    if getattr(inotify_simple, "_libc", False) is None:
        own = ctypes.CDLL(None, use_errno=True)
        if hasattr(own, "inotify_init1"):
            inotify_simple._libc = own


class TranscriptWatcher:
    """Calls ``on_change(uuid)`` when an agent's transcript file may have grown
    (``on_change(None)``: anything may have; poll every agent)."""

    def __init__(self, on_change: Callable[[str | None], None], limit: int | None = None):
        self._on_change = on_change
        env = os.environ.get("ORCR_WATCH_LIMIT")
        self._limit = int(env) if env not in (None, "") else limit
        self._lock = threading.Lock()
        self._inotify = None
        self.error: str | None = None
        self._wd_of_dir: dict[str, int] = {}
        self._files: dict[int, dict[str, set[str]]] = {}  # wd -> file name -> uuids
        self._where: dict[str, tuple[int, str]] = {}  # uuid -> (wd, file name)
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        if self._limit == 0:
            self.error = "notifications turned off (ORCR_WATCH_LIMIT=0)"
        elif INotify is None:
            self.error = "no inotify on this platform: transcripts are polled"
        else:
            try:
                _own_libc()
                self._inotify = INotify()
            except OSError as exc:  # fs.inotify.max_user_instances reached
                self.error = f"inotify unavailable: {exc}"
        if self.error:
            log.info("%s", self.error)

    @property
    def available(self) -> bool:
        return self._inotify is not None

    def start(self) -> None:
        if self._inotify is not None and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="orcr-fswatch", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def watched(self, uuid: str) -> bool:
        with self._lock:
            return uuid in self._where

    def count(self) -> int:
        with self._lock:
            return len(self._where)

    def watch(self, uuid: str, path: str) -> bool:
        """Watch ``path`` for ``uuid``. False when it cannot be (poll it instead)."""
        if self._inotify is None:
            return False
        directory, name = os.path.split(os.path.abspath(path))
        with self._lock:
            if uuid in self._where:
                wd, old = self._where[uuid]
                if self._files.get(wd, {}).get(old) is not None and old == name:
                    return True
                self._drop(uuid)
            wd = self._wd_of_dir.get(directory)
            if wd is None:
                try:
                    if self._limit is not None and len(self._wd_of_dir) >= self._limit:
                        raise OSError(errno.ENOSPC, "watch limit reached (ORCR_WATCH_LIMIT)")
                    wd = self._inotify.add_watch(directory, MASK)
                except OSError as exc:
                    if exc.errno == errno.ENOSPC and not self.error:
                        log.warning(
                            "inotify watch limit reached (fs.inotify.max_user_watches): "
                            "further transcripts are polled"
                        )
                    self.error = f"{directory}: {exc.strerror or exc}"
                    return False
                self._wd_of_dir[directory] = wd
            self._files.setdefault(wd, {}).setdefault(name, set()).add(uuid)
            self._where[uuid] = (wd, name)
            return True

    def unwatch(self, uuid: str) -> None:
        with self._lock:
            self._drop(uuid)

    def _drop(self, uuid: str) -> None:
        wd, name = self._where.pop(uuid, (None, None))
        if wd is None:
            return
        files = self._files.get(wd, {})
        files.get(name, set()).discard(uuid)
        if not files.get(name):
            files.pop(name, None)
        if not files:
            self._files.pop(wd, None)
            for d, w in list(self._wd_of_dir.items()):
                if w == wd:
                    del self._wd_of_dir[d]
            try:
                self._inotify.rm_watch(wd)
            except OSError:
                pass  # the directory is already gone

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                events = list(self._inotify.read(timeout=5000))
            except OSError as exc:  # pragma: no cover - the fd broke
                log.warning("inotify read failed: %s", exc)
                self._on_change(None)
                return
            changed: set[str] = set()
            everything = False
            with self._lock:
                for ev in events:
                    if ev.mask & _OVERFLOW:
                        everything = True
                        continue
                    files = self._files.get(ev.wd)
                    if files is None:
                        continue
                    if ev.mask & _IGNORED:  # the directory went away: poll its agents
                        for uuids in files.values():
                            for uuid in list(uuids):
                                changed.add(uuid)
                                self._where.pop(uuid, None)
                        self._files.pop(ev.wd, None)
                        for d, w in list(self._wd_of_dir.items()):
                            if w == ev.wd:
                                del self._wd_of_dir[d]
                        continue
                    changed |= files.get(ev.name, set())
            if everything:
                self._on_change(None)
            for uuid in changed:
                self._on_change(uuid)
