"""Socket methods ``notify.ls``, ``notify.test`` and ``notices.drain`` (registered in the
route table, :mod:`orcr_core.server.routes`)."""

from __future__ import annotations

import json
import socket
import time
from typing import TYPE_CHECKING

from orcr_core.common.times import iso
from orcr_core.notify import rules
from orcr_core.protocol import ProtocolError
from orcr_core.server.routes import route
from orcr_core.store.models import Notification

if TYPE_CHECKING:
    from orcr_core.server.context import ServerContext


def _last(sink: str) -> dict | None:
    row = (
        Notification.select()
        .where((Notification.sink == sink) & (Notification.state != "held"))
        .where(Notification.state != "pending")
        .order_by(Notification.id.desc())
        .first()
    )
    if row is None:
        return None
    body = json.loads(row.body)
    return {
        "key": body["key"],
        "rule": row.rule,
        "title": body.get("title"),
        "state": row.state,
        "at": row.sent_at or row.created,
        "attempts": row.attempts,
        "detail": row.error,
    }


@route("notify.ls")
def notify_ls(server: ServerContext, conn, rid, params):
    """The rules (with their settings) and every registered sink: on or off (and
    why), rows waiting, and its last delivery."""
    n = server.notifier
    out_rules = [
        {"name": name, "default": on, "about": about, **rules.rule_settings(server.config, name)}
        for name, (on, about) in rules.RULES.items()
    ]
    sinks = []
    for name in sorted(server.registry.sinks):
        waiting = (
            Notification.select()
            .where((Notification.sink == name) & Notification.state.in_(("held", "pending")))
            .count()
        )
        sinks.append(
            {
                "name": name,
                "on": name in n.sinks,
                "off_because": n.errors.get(name)
                or (None if name in n.sinks else "not configured"),
                "waiting": waiting,
                "last": _last(name),
                # the last `notify test` through it (this server's life): a test goes
                # around the outbox, so without this a sink that answered HTTP 200
                # still said "nothing sent yet"
                "last_test": _tests(server).get(name),
            }
        )
    return {"rules": out_rules, "sinks": sinks}


@route("notify.test")
def notify_test(server: ServerContext, conn, rid, params):
    """Send a test notification through each sink that is on (or the one named),
    now, outside the outbox; what each answered."""
    n = server.notifier
    only = params.get("sink")
    if only is not None and only not in server.registry.sinks:
        raise ProtocolError(
            "not_found", f"no sink {only!r}; sinks: {', '.join(sorted(server.registry.sinks))}"
        )
    note = {
        "key": f"test-{time.time_ns()}",
        "rule": "test",
        "subject": "orcr",
        "title": "orcr test notification",
        "text": "this is a test from orcr notify test",
        "action": "orcr notify ls",
        "at": iso(time.time(), "seconds"),
        "host": socket.gethostname(),
    }
    results = []
    for name in sorted(server.registry.sinks):
        if only is not None and name != only:
            continue
        sink = n.sinks.get(name)
        if sink is None:
            why = n.errors.get(name) or "not configured"
            results.append({"sink": name, "ok": False, "detail": f"off: {why}"})
            continue
        try:
            results.append({"sink": name, "ok": True, "detail": sink.send(dict(note))})
        except Exception as exc:
            results.append({"sink": name, "ok": False, "detail": f"{type(exc).__name__}: {exc}"})
        _tests(server)[name] = dict(results[-1], at=time.time())
    return {"key": note["key"], "results": results}


def _tests(server: ServerContext) -> dict[str, dict]:
    """Each sink's last ``notify test`` result, kept in memory for the server's life."""
    return server.notify_tests


@route("notices.drain")
def notices_drain(server: ServerContext, conn, rid, params):
    """A plugin wrote a notice (orcr_core.notify.notices): turn the notices waiting in
    the data directory into events now, each once; how many were new."""
    from orcr_core.notify import notices

    return {"events": notices.drain(server)}
