"""The emulator's request loop: one connection, one request, one reply (or a stream).

:class:`Serving` is a part of :class:`orcr_testing.herdr.emulator.Emulator` (its
``serving``): it decodes a request line, validates it, runs its handler (under the
app lock, ``ping`` and waits aside), validates and sends the reply, and streams
events for a subscription. It owns the schema check (violations are recorded, never
fatal), the request log, the open streams and the transport's fault injection; of
the emulator it reads its lock, lifecycle, dialect and session state, and hands it
to the handlers (``handler(emu, params, request_id)``).
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orcr_testing.herdr.dialect import BATCH
from orcr_testing.herdr.events import TICK, TypeEntry
from orcr_testing.herdr.replies import Deferred, Stream, Violation  # noqa: F401 (re-exported)
from orcr_testing.herdr.transport import ApiError, peer_gone, read_request, send_line

if TYPE_CHECKING:
    from orcr_testing.herdr.emulator import Emulator


class Serving:
    """The transport side of the emulator. ``checker``: the schema checker of its
    protocol, or None (not strict); ``violations_path``: a JSONL file that also gets
    every violation (subprocess mode)."""

    def __init__(self, emu: Emulator, checker: Any, violations_path: str | os.PathLike | None):
        self.emu = emu
        self.checker = checker
        self.violations_path = Path(violations_path) if violations_path else None
        self.violations: list[Violation] = []
        self.requests: list[dict] = []  # every parsed request, in arrival order
        self.drop: list[str] = []  # fault injection: "before" / "after" per connection
        self.muted = False  # fault injection: an outage, every connection dropped
        self.muted_connections = 0  # connections dropped while muted
        self.reply_hooks: list[Callable[[str, dict], dict]] = []  # fault injection, one each
        self.streams: list[Stream] = []  # open subscriptions
        self.lose_next = 0  # fault injection: subscriptions to end with events_lost at once
        self.events_lost_sent = 0
        self.stop_after_reply = threading.Event()  # set by server.stop
        #: fault injection: run one each when an ``events.subscribe`` arrives, before its
        #: subscription starts (:meth:`TestHooks.before_subscribe`)
        self.subscribe_changes: list[Callable[[], None]] = []

    # ------------------------------------------------------------------ schema
    def _violation(self, kind: str, errors: list[str], message: Any) -> None:
        v = Violation(kind, errors, message)
        self.violations.append(v)
        print(f"herdr-emulator: schema violation ({kind}): {errors}", file=sys.stderr)
        if self.violations_path is not None:
            with open(self.violations_path, "a") as f:
                f.write(json.dumps({"kind": kind, "errors": errors, "message": message}) + "\n")

    def check(self, kind: str, message: dict) -> list[str]:
        """Validate ``message`` (a ``request``, ``reply`` or ``event``) against the
        schema; its errors, recorded as a violation."""
        if self.checker is None:
            return []
        check = {
            "request": self.checker.check_request,
            "reply": self.checker.check_reply,
            "event": self.checker.check_event,
        }[kind]
        errors = check(message)
        if errors:
            self._violation(kind, errors, message)
        return errors

    # ------------------------------------------------------------------ transport
    def serve(self, conn: socket.socket) -> None:
        """One connection (the listener's callback)."""
        emu = self.emu
        with emu.lock:
            drop = self.drop.pop(0) if self.drop else None
            if self.muted:
                drop = "before"
                self.muted_connections += 1
        if drop == "before":
            return
        line = read_request(conn, emu.request_timeout)
        if line is None:
            return
        reply, stream = self._handle_line(line)
        if reply is None or drop == "after":
            return
        with emu.lock:
            hook = self.reply_hooks.pop(0) if self.reply_hooks else None
        if hook is not None:
            reply = hook(reply.get("_method", ""), reply)
        reply.pop("_method", None)
        self.check("reply", reply)
        if stream is not None:  # open before the ack: a client may act on the ack at once
            self._open_stream(stream)
        sent = send_line(conn, reply)
        if self.stop_after_reply.is_set():
            threading.Thread(target=self._server_stop, name="herdr-stop", daemon=True).start()
            return
        if stream is not None:
            if sent:
                self._stream(conn, stream)
            else:
                self._close_stream(stream)

    def _server_stop(self) -> None:
        self.emu.stop()
        self.emu.stop_requested.set()

    def _handle_line(self, line: bytes) -> tuple[dict | None, Stream | None]:
        emu = self.emu
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            return None, None
        text = text.strip()
        if not text:
            return None, None
        try:
            request = json.loads(text)
        except ValueError as exc:
            return _error("", "invalid_request", f"invalid request: {exc}"), None
        self.requests.append(request if isinstance(request, dict) else {"raw": request})
        # herdr 0.9.2+ echoes a decodable request's string id in every error reply
        echo = ""
        if emu.dialect.error_ids and isinstance(request, dict):
            echo = request["id"] if isinstance(request.get("id"), str) else ""
        from orcr_testing.herdr.handlers import HANDLERS

        method = request.get("method") if isinstance(request, dict) else None
        if emu.dialect.error_ids and isinstance(method, str) and not _basic_problems(request):
            if method in emu.dialect.removed or (
                method not in HANDLERS
                and self.checker is not None
                and method not in self.checker.methods
            ):
                self.check("request", request)  # a client bug all the same: recorded
                return _error(echo, "unknown_method", f"unknown method: {method}"), None
        problems = self.check("request", request) if isinstance(request, dict) else ["not object"]
        if not problems and self.checker is None:
            problems = _basic_problems(request)
        if problems:
            return _error(echo, "invalid_request", f"invalid request: {problems[0]}"), None
        req_id, method, params = request["id"], request["method"], request["params"]
        handler = HANDLERS.get(method)
        try:
            if handler is None:
                raise ApiError("not_implemented", f"{method} is not implemented by the emulator")
            if method == "ping":  # answered on the socket thread, never blocked by the app
                result = handler(emu, params, req_id)
            else:
                with emu.lock:
                    if emu.stopped.is_set():
                        raise ApiError("server_unavailable", "server is shutting down")
                    result = handler(emu, params, req_id)
                    if emu.state.dirty_at is not None and emu.save_delay <= 0:
                        emu.state.save()
            if isinstance(result, Deferred):  # a wait: held outside the app lock
                result = result.run()
        except ApiError as err:
            reply = _error(
                err.reply_id if err.reply_id is not None else req_id, err.code, err.message
            )
            reply["_method"] = method
            return reply, None
        except (KeyError, TypeError, ValueError) as exc:  # what serde would have refused
            return _error(echo, "invalid_request", f"invalid request: {exc!r}"), None
        stream = None
        if isinstance(result, Stream):
            stream, result = result, {"type": "subscription_started"}
        return {"id": req_id, "result": result, "_method": method}, stream

    def _stream(self, conn: socket.socket, stream: Stream) -> None:
        """The subscription loop: wake every 100 ms; per entry and wake, one event
        (herdr 0.8) or a bounded batch (0.9). On 0.9 an entry that fell behind the
        ring, or a test's :meth:`lose_events`, ends it with ``events_lost``."""
        emu = self.emu
        batch = BATCH if emu.dialect.batched else 1
        try:
            while not emu.stopped.is_set():
                if emu.stopped.wait(TICK) or peer_gone(conn):
                    return
                if emu.dialect.events_lost and (
                    stream.lost.is_set()
                    or any(isinstance(e, TypeEntry) and e.overrun() for e in stream.entries)
                ):
                    self.events_lost_sent += 1
                    reply = _error(
                        stream.request_id, "events_lost", "subscriber fell behind the event history"
                    )
                    self.check("reply", reply)
                    send_line(conn, reply)
                    return  # herdr closes that subscription connection
                for entry in stream.entries:
                    for _ in range(batch):
                        envelope = entry.next()
                        if envelope is None:
                            break
                        self.check("event", envelope)
                        if not send_line(conn, envelope):
                            return
        finally:
            self._close_stream(stream)

    def _open_stream(self, stream: Stream) -> None:
        with self.emu.lock:
            self.streams.append(stream)
            if self.lose_next > 0:  # "including while its subscriptions are being initialized"
                self.lose_next -= 1
                stream.lost.set()

    def _close_stream(self, stream: Stream) -> None:
        with self.emu.lock:
            if stream in self.streams:
                self.streams.remove(stream)
        hub = self.emu.state.hub
        with hub.lock:
            hub.status_entries = [e for e in hub.status_entries if e not in stream.entries]


def _error(req_id: str, code: str, message: str) -> dict:
    return {"id": req_id, "error": {"code": code, "message": message}}


def _basic_problems(request: Any) -> list[str]:
    """Without the schema: the shape serde would insist on."""
    if not isinstance(request, dict):
        return ["expected an object"]
    if not isinstance(request.get("id"), str):
        return ["invalid type for `id`: expected a string"]
    if not isinstance(request.get("method"), str):
        return ["missing field `method`"]
    if not isinstance(request.get("params"), dict):
        return ["missing field `params`"]
    return []
