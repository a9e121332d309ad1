"""Run a server in this process, as a supervisor (systemd, launchd) or the
CLI's autostart runs it: logging, signals and the exit status."""

from __future__ import annotations

import logging
import os

from orcr_core import dirs
from orcr_core.store.lean import import_peewee

import_peewee()  # first, so that no import below pulls psycopg in (store/lean.py)

from orcr_core.server.app import AlreadyRunning, Server  # noqa: E402
from orcr_core.store import health  # noqa: E402

log = logging.getLogger("orcr.server")

LOG_FORMAT = "%(asctime)s %(name)s %(levelname)s %(message)s"


def _log_to_file_too() -> None:
    """Also append the log to ``run/server.log`` (where ``orcr`` looks for why a
    server exited), unless stderr already is that file."""
    path = dirs.run_dir() / "server.log"
    try:
        dirs.ensure_private_dir(path.parent)
        st, err = os.stat(path) if path.exists() else None, os.fstat(2)
        if st is not None and (st.st_dev, st.st_ino) == (err.st_dev, err.st_ino):
            return
        handler = logging.FileHandler(path)
    except (OSError, dirs.Unwritable) as exc:
        log.warning("cannot write %s: %s; logging to stderr only", path, exc)
        return
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    logging.getLogger().addHandler(handler)


def main_foreground(already_running_ok: bool = True) -> int:
    """Run a server in this process; the exit status for the caller.

    Another server holding the lock is success for an autostart (another
    client's server won the race) but a failure for ``orcr server start
    --foreground``: a supervisor must see that its server did not start. That
    one logs to stderr (journald reads it) and to ``run/server.log``; it exits
    0 only after a requested stop (SIGTERM, SIGINT, ``orcr server stop``).
    """
    import signal

    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)
    if not already_running_ok:
        _log_to_file_too()
    try:
        server = Server()
    except Exception as exc:
        log.error("%s", exc)
        return 1
    signal.signal(signal.SIGTERM, lambda *a: server.stop())
    signal.signal(signal.SIGINT, lambda *a: server.stop())
    try:
        server.serve()
    except AlreadyRunning as exc:
        if already_running_ok:
            log.info("%s", exc)
            return 0
        log.error("%s; this one did not start (orcr server stop stops that one)", exc)
        return 1
    except Exception as exc:
        code = getattr(exc, "code", None)
        why = health.corruption(exc)
        if why:  # recovery read a damaged page: the header looked fine
            code, exc = (
                "store_corrupted",
                f"the store is damaged ({why}); " + health.what_to_do(server.store_path),
            )
        log.error("%s%s", f"{code}: " if code else "", exc)
        if server.started_threads():
            # a normal exit would wait for the pipeline threads (the pool's are not
            # daemons) while this process keeps the store and the server lock with
            # no socket: the client's start would time out instead of failing now
            logging.shutdown()
            os._exit(1)
        return 1
    if server.failure:
        return 1
    log.info("orcr server %s stopped", os.getpid())
    return 0
