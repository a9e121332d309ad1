"""The running server follows its config file: a valid edit applies within 2 s.

One thread watches the file's directory (inotify where there is one: an
editor's save is often a rename over the file, which a watch on the file itself
would miss) and, as a backstop, compares the file's (inode, size, mtime) every
second, so a missed or absent notification costs at most a second. A change
reloads through ``Server.reload_config``: a valid file replaces the
configuration and says which keys changed; an invalid one leaves the last good
configuration in force and the reason in ``server status``, ``doctor``, the
server log and a ``config.invalid`` event (docs/configuration.md, "Live edits").
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orcr_core.server.context import ServerContext

log = logging.getLogger("orcr.config")

#: the backstop: how often the file's stat is compared without a notification
POLL = 1.0
#: a burst of writes (an editor's save) settles for this long before the file is read
SETTLE = 0.1


def changes(old: dict, new: dict, prefix: str = "") -> dict[str, list[Any]]:
    """``{dotted key: [old, new]}`` for every leaf that differs (None: absent)."""
    out: dict[str, list[Any]] = {}
    for k in sorted(set(old) | set(new), key=str):
        a, b = old.get(k), new.get(k)
        key = f"{prefix}{k}"
        if isinstance(a, dict) and isinstance(b, dict):
            out.update(changes(a, b, key + "."))
        elif isinstance(a, dict) or isinstance(b, dict):
            out.update(
                changes(
                    a if isinstance(a, dict) else {}, b if isinstance(b, dict) else {}, key + "."
                )
            )
        elif a != b:
            out[key] = [a, b]
    return out


def refuse_mux_switch(changed: dict[str, list[Any]], live: int) -> None:
    """A key that moves orcr to another multiplexer server is not applied while agents
    are live: their panes would be lost to sight (``config set`` refuses it too)."""
    from orcr_core.config import ConfigError
    from orcr_core.config.edit import MUX_KEYS

    switched = [k for k in changed if k in MUX_KEYS]
    if switched and live:
        raise ConfigError(
            f"{', '.join(switched)} changed while {live} agent{'s are' if live != 1 else ' is'} "
            "live on the multiplexer orcr drives now; the change would orphan them. Drain "
            "them first (orcr agent kill '**', or wait until they end), then reload"
        )


def signature(path: Path) -> tuple | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def _inotify(directory: Path):
    """An inotify watching ``directory``, or None where there is none."""
    try:
        from inotify_simple import INotify
        from inotify_simple import flags as f

        ino = INotify()
        ino.add_watch(
            str(directory), f.CLOSE_WRITE | f.MOVED_TO | f.CREATE | f.DELETE | f.MOVED_FROM
        )
        return ino
    except (ImportError, OSError) as exc:
        log.info("config file %s is polled (no inotify: %s)", directory, exc)
        return None


def follow(server: ServerContext, path: Path) -> None:
    """Reload ``server``'s configuration whenever ``path`` changes, until it stops."""
    seen = signature(path)
    ino = _inotify(path.parent) if path.parent.is_dir() else None
    try:
        while not server.stopping.is_set():
            if ino is not None:
                events = ino.read(timeout=int(POLL * 1000))
                if events and not any(e.name == path.name for e in events):
                    continue
                if events:
                    server.stopping.wait(SETTLE)
            elif server.stopping.wait(POLL):
                return
            now = signature(path)
            if now == seen:
                continue
            seen = now
            try:
                server.reload_config(source="edit")
            except Exception as exc:  # noqa: BLE001 - said by reload_config; keep watching
                log.debug("config reload after an edit failed: %s", exc)
    finally:
        if ino is not None:
            ino.close()
