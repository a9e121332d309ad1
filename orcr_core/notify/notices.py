"""Notices: durable reports from outside the server (a task parked in inbox/, sent
to failed/) that become one event row each, exactly once.

A plugin that changed something the server cannot see writes a notice: one JSON
file ``<data dir>/notices/<id>.json``, written whole and fsync'd (file and
folder) before its writer lets go of the change, so a notice outlives a crash of
the writer and needs no running server. It then pokes the server
(``notices.drain``, best effort, never starting one). The server drains the
folder at start, on a poke and every DRAIN_EVERY seconds: in one transaction it
writes the event and keeps the notice's id (table ``notice``), then deletes the
file. A crash before the commit leaves the file for the next drain; a crash after
it leaves a file whose id is kept, deleted without a second event. A writer that
must write the same notice again after a crash (the task queue's lock recovery)
writes it under the same id: it is never a second event either.

The writing side (``new``, ``write``, ``poke``) is import-light: ``orcr tasks``
uses it. ``drain`` runs in the server.
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from orcr_core import dirs

if TYPE_CHECKING:
    from orcr_core.server.context import ServerContext

log = logging.getLogger("orcr.notify")

#: kinds a notice may carry, with their required string fields (the optional one:
#: ``reason``); docs/socket-api.md lists them with the event kinds
KINDS = {"task.moved": ("queue", "task", "from", "to")}
POKE_TIMEOUT = 2.0  # seconds a poke waits for the server's reply
DRAIN_EVERY = 5.0  # seconds between drains without a poke (a poke that timed out)
_ID = re.compile(r"^[0-9]{20}-[0-9a-f]{12}$")


def notices_dir() -> Path:
    return dirs.data_dir() / "notices"


# -- the writing side (import-light) -------------------------------------------------------
def new(kind: str, data: dict) -> dict:
    """A notice not yet written: a fresh id (time-ordered), where it goes, what it says.
    Keep it (a journal) to write it again under the same id after a crash."""
    nid = f"{time.time_ns():020d}-{secrets.token_hex(6)}"
    return {"id": nid, "dir": str(notices_dir()), "kind": kind, "data": data, "at": time.time()}


def write(notice: dict) -> Path:
    """Write the notice durably (whole or not at all, fsync'd file and folder). Writing
    it again, after a crash, is harmless: the server keeps each id once."""
    folder = Path(notice["dir"])
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{notice['id']}.json"
    tmp = folder / f".{notice['id']}.{os.getpid()}-{secrets.token_hex(3)}.tmp"
    body = {k: notice[k] for k in ("id", "kind", "data", "at")}
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(json.dumps(body, separators=(",", ":")))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return path


def poke(timeout: float = POKE_TIMEOUT) -> bool:
    """Ask a running server to drain the notices now; True when it answered. Never
    starts a server and never waits for one that is starting or stopping (it drains at
    start); a server that does not answer within ``timeout`` is left to its own timer."""
    from orcr_core.sdk.client import call_once

    try:
        call_once("notices.drain", timeout=timeout)
        return True
    except Exception:  # a poke is never in the way (OSError, an error or no reply)
        return False


# -- the server side -----------------------------------------------------------------------
def problem(rec, name: str) -> str | None:
    """Why a notice file cannot become an event (None when it can)."""
    if not isinstance(rec, dict):
        return "not a JSON object"
    if not isinstance(rec.get("id"), str) or not _ID.match(rec["id"]):
        return "id is not <20 digits>-<12 hex digits>"
    if f"{rec['id']}.json" != name:
        return f"id {rec['id']} is not its file name"
    kind, data = rec.get("kind"), rec.get("data")
    if kind not in KINDS:
        return f"kind {kind!r} is not one of {', '.join(KINDS)}"
    if not isinstance(data, dict):
        return "data is not an object"
    for field in KINDS[kind]:
        value = data.get(field)
        if not isinstance(value, str) or not value or len(value) > 4096:
            return f"{kind} needs data.{field}: a string of 1-4096 characters"
    return None


_drain_lock = threading.Lock()


def drain(server: ServerContext | None = None) -> int:
    """Turn every notice file into its event, exactly once; the number of new events.
    A file that is not a notice is renamed ``<name>.bad`` (kept) with a warning."""
    from orcr_core.store import events, faults
    from orcr_core.store.models import Notice, db

    folder = notices_dir()
    with _drain_lock:
        try:
            names = sorted(n for n in os.listdir(folder) if n.endswith(".json"))
        except FileNotFoundError:
            return 0
        emitted = 0
        for name in names:
            if name.startswith("."):
                continue  # a writer's temp file
            path = folder / name
            try:
                rec = json.loads(path.read_text(encoding="utf-8"))
            except FileNotFoundError:
                continue
            except (OSError, ValueError) as exc:
                rec, why = None, f"not JSON ({exc})"
            else:
                why = problem(rec, name)
            if why is not None:
                log.warning("notice %s set aside as %s.bad: %s", path, name, why)
                os.replace(path, folder / f"{name}.bad")
                continue
            data = rec["data"]
            fields = {f: data[f] for f in KINDS[rec["kind"]]}
            if isinstance(data.get("reason"), str):
                fields["reason"] = data["reason"][:2000]
            with db.atomic("IMMEDIATE"):
                if Notice.get_or_none(Notice.id == rec["id"]) is None:
                    seq = events.emit(rec["kind"], notice=rec["id"], **fields)
                    faults.point("notice_emitted")
                    Notice.insert(id=rec["id"], kind=rec["kind"], seq=seq, at=time.time()).execute()
                    emitted += 1
            faults.point("notice_committed")
            path.unlink(missing_ok=True)
        if emitted and server is not None:
            server.notify(queue=False)
        return emitted


def drain_loop(server: ServerContext) -> None:
    """The server's drain thread: at start, then every DRAIN_EVERY seconds."""
    from orcr_core.store.models import db

    db.connect(reuse_if_open=True)
    while True:
        try:
            drain(server)
        except Exception as exc:
            if server.store_error(exc):
                return
            log.exception("notices: drain failed; retrying")
        if server.stopping.wait(DRAIN_EVERY):
            return
