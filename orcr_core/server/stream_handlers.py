"""The streaming socket methods: ``watch.open`` (a snapshot, then every later
event under one cursor pin) and ``events.subscribe`` (events from a cursor, under
a cursor pin too: retention never deletes what a connected follower has not been
sent, however far behind it reads)."""

from __future__ import annotations

import select
import socket
from typing import TYPE_CHECKING

from orcr_core.contracts import AgentStatus
from orcr_core.protocol import ProtocolError
from orcr_core.server import sandboxed
from orcr_core.server.routes import route
from orcr_core.server.shapes import agent_dict, param
from orcr_core.store import events
from orcr_core.store.models import Agent, Meta, db
from orcr_core.usage import record as usage

if TYPE_CHECKING:
    from orcr_core.server.context import ServerContext

#: what a streaming handler returns: it answered on the connection itself
STREAMED = object()


def _snapshot_rows(params) -> list[dict]:
    q = Agent.select().order_by(Agent.id)
    if not params.get("all", True):
        q = q.where(Agent.status != AgentStatus.ENDED)
    if params.get("target"):
        q = q.where((Agent.uuid == params["target"]) | (Agent.path == params["target"]))
    return [agent_dict(a) for a in q]


@route("watch.open")
def watch_open(server: ServerContext, conn, rid, params):
    """Snapshot + stream under one cursor pin: nothing missed, nothing doubled."""
    pin = server.bus.pin(0)
    try:
        with db.atomic():  # one read transaction: rows and seq from the same instant
            rows = _snapshot_rows(params)
            if caller := _caller(conn):  # a sandboxed agent's own socket: its subtree only
                rows = sandboxed.filter_rows(server, caller, rows)
            rows = usage.attach(rows)  # top's TOKENS column
            snap_seq = events.last_seq()
        server.bus.move_pin(pin, snap_seq)
        conn.send({"id": rid, "result": {"snapshot_seq": snap_seq, "agents": rows}})
        only = {r["uuid"] for r in rows} if params.get("target") else None
        _stream(server, conn, rid, snap_seq, pin, only, _visible(server, conn))
    finally:
        server.bus.unpin(pin)
    return STREAMED


def _floor() -> int:
    row = Meta.get_or_none(Meta.key == "events_floor")
    return int(row.value) if row else 0


@route("events.subscribe")
def events_subscribe(server: ServerContext, conn, rid, params):
    since = param(params, "since_seq", int, required=False, default=0)
    # pinned before the floor is read: from here retention cannot pass the cursor (a
    # pass that read the pins just before is caught by _stream's gap check)
    pin = server.bus.pin(since)
    try:
        floor = _floor()
        if params.get("clamp") is True:  # a reader of the log: start at the oldest row kept
            since = max(since, floor)
            server.bus.move_pin(pin, since)
        if since < floor:
            raise ProtocolError(
                "server_error",
                f"cursor {since} is older than event retention (oldest kept: {floor + 1}); "
                "re-snapshot",
                cause="cursor_expired",
            )
        # a sandboxed agent's listing ends at the last event it may see
        caller = _caller(conn)
        last = sandboxed.last_seen_seq(server, caller) if caller else events.last_seq()
        conn.send({"id": rid, "result": {"since_seq": since, "last_seq": last}})
        _stream(server, conn, rid, since, pin, see=_visible(server, conn))
    finally:
        server.bus.unpin(pin)
    return STREAMED


def _caller(conn) -> str | None:
    """The sandboxed agent whose own socket ``conn`` came through; None: the user."""
    return getattr(conn, "caller", None)


def _visible(server: ServerContext, conn):
    """For a sandboxed agent's own socket, which events it sees (its subtree's)."""
    caller = _caller(conn)
    return sandboxed.visible_events(server, caller) if caller else None


def _stream(
    server: ServerContext, conn, rid, cursor: int, pin: int, only: set | None = None, see=None
) -> None:
    while not server.stopping.is_set():
        gen = server.bus.generation()
        rows = events.since(cursor, 500)
        if rows and rows[0]["seq"] > cursor + 1 and cursor < _floor():
            conn.send(
                {
                    "id": rid,
                    "error": {
                        "code": "server_error",
                        "message": "cursor expired",
                        "cause": "cursor_expired",
                    },
                }
            )
            return
        for ev in rows:
            if (only is None or ev["agent"] in only) and (see is None or see(ev)):
                conn.send({"id": rid, "event": ev})
            cursor = ev["seq"]
        server.bus.move_pin(pin, cursor)
        if not rows:
            server.bus.wait(gen, timeout=1.0)
            if _peer_gone(conn.sock):
                return


def _peer_gone(sock) -> bool:
    r, _, _ = select.select([sock], [], [], 0)
    if not r:
        return False
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True
