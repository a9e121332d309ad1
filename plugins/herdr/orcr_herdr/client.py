"""herdr's socket protocol, client side: one request per connection.

A request is one JSON line; the server answers one line and closes. A server
that is down (socket missing or refusing) is retried briefly, then reported as
a retryable :class:`DriverError`; so is a connection reset before the server
read the request (AF_UNIX reports ECONNRESET exactly when the peer closed with
unread data). A connection closed *after* the server read the request is
retried only for read-only methods: retrying ``layout.apply`` could start an
agent twice, so the caller gets a retryable ``connection_lost`` and reconciles
by label instead.

Replies are matched by id on every protocol: herdr 0.9.2+ echoes the request's
id in error replies too, 0.8 answers ``""`` to a request it could not decode as
one and its internal probe id ``<id>:sub:<n>:probe`` to a rejected
subscription entry. A reply carrying any other id is not this request's
(``bad_reply``). ``unknown_method`` (0.9.2+, e.g. the removed ``pane.graphics.*``)
comes back as a :class:`DriverError` with that code, as every error code does.
"""

from __future__ import annotations

import errno
import itertools
import json
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from orcr_core.contracts import DriverError

#: Methods with no side effect: safe to resend when a connection drops mid-request.
READ_ONLY = frozenset(
    {
        "ping",
        "session.snapshot",
        "workspace.list",
        "workspace.get",
        "tab.list",
        "tab.get",
        "pane.list",
        "pane.get",
        "pane.current",
        "pane.read",
        "pane.process_info",
        "agent.list",
        "agent.get",
    }
)
#: herdr error codes that mean "ask again later".
RETRYABLE_CODES = frozenset({"server_unavailable", "timeout"})
_NOT_RUNNING = (errno.ENOENT, errno.ECONNREFUSED, errno.ENOTSOCK, errno.ECONNRESET)
_ids = itertools.count(1)


#: the error code herdr 0.9.2+ ends a subscription with when its subscriber fell
#: behind the event history (then it closes that connection)
EVENTS_LOST = "events_lost"


def _lost(msg: Any, rid: str) -> bool:
    """``events_lost`` as herdr sends it (an error reply carrying the subscribe id,
    or an id it could not tell), or as an event line, which no release sends but
    some clients accept (HERDR-0.9.md §4): the same "resync now" either way."""
    if not isinstance(msg, dict):
        return False
    if msg.get("event") == EVENTS_LOST:
        return True
    err = msg.get("error")
    return isinstance(err, dict) and err.get("code") == EVENTS_LOST and reply_matches(msg, rid)


def reply_matches(reply: dict, rid: str) -> bool:
    """Whether ``reply`` answers request ``rid``: its own id; ``""`` on an error
    (herdr could not read the id: 0.8 for any malformed request, 0.9 for invalid
    JSON); 0.8's probe id ``<rid>:sub:<n>:probe`` on a subscription error."""
    got = reply.get("id")
    if got == rid:
        return True
    if "error" not in reply or not isinstance(got, str):
        return False
    return got == "" or got.startswith(f"{rid}:sub:")


class HerdrClient:
    """Talks to one herdr API socket. Thread-safe: every call opens its own connection."""

    def __init__(
        self,
        socket_path: str | os.PathLike,
        timeout: float = 30.0,
        attempts: int = 4,
        backoff: float = 0.05,
    ):
        self.socket_path = str(socket_path)
        self.timeout, self.attempts, self.backoff = timeout, attempts, backoff
        #: ``time.monotonic()`` of herdr's last reply (an error reply too), 0.0 once a
        #: request found it not answering: what ``HerdrDriver.ensure_session`` trusts
        #: instead of a ping of its own
        self.answered_at = 0.0

    def _connect(self, timeout: float) -> socket.socket:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            sock.connect(self.socket_path)
        except BaseException:
            sock.close()
            raise
        return sock

    def _unavailable(self, why: str) -> DriverError:
        return DriverError(
            f"herdr is not answering at {self.socket_path}: {why}",
            code="herdr_unavailable",
            retryable=True,
        )

    def request(self, method: str, params: dict | None = None, attempts: int | None = None) -> dict:
        """Send one request and return its ``result``; raise :class:`DriverError` otherwise."""
        attempts = self.attempts if attempts is None else attempts
        rid = f"orcr-{os.getpid()}-{next(_ids)}"
        line = {"id": rid, "method": method, "params": params or {}}
        payload = (json.dumps(line, separators=(",", ":")) + "\n").encode()
        last = "no attempt"
        for attempt in range(max(attempts, 1)):
            if attempt:
                time.sleep(self.backoff * (2 ** (attempt - 1)))
            try:
                sock = self._connect(self.timeout)
            except OSError as exc:
                if exc.errno in _NOT_RUNNING or isinstance(exc, TimeoutError):
                    last = exc.strerror or str(exc)
                    continue
                raise DriverError(
                    f"cannot connect to herdr at {self.socket_path}: {exc}", code="herdr_socket"
                ) from exc
            try:
                reply = self._exchange(sock, payload)
            except TimeoutError:
                self.answered_at = 0.0
                raise DriverError(
                    f"herdr did not answer {method} within {self.timeout:g}s",
                    code="herdr_timeout",
                    retryable=True,
                ) from None
            except (ConnectionResetError, BrokenPipeError) as exc:
                # AF_UNIX resets only when the server closed with our request unread
                # (or before we wrote it): nothing happened, any method may be resent.
                last = f"connection reset before herdr read {method}: {exc}"
                continue
            except OSError as exc:
                reply, last = None, str(exc)
            finally:
                sock.close()
            if reply is None:
                self.answered_at = 0.0
                if method in READ_ONLY:
                    last = f"connection dropped during {method}"
                    continue
                raise DriverError(
                    f"herdr dropped the connection during {method}; its effect is unknown",
                    code="connection_lost",
                    retryable=True,
                )
            # a stop's reply is herdr's last: it answers no more
            self.answered_at = 0.0 if method == "server.stop" else time.monotonic()
            return self._result(method, reply, rid)
        self.answered_at = 0.0
        raise self._unavailable(last)

    @staticmethod
    def _exchange(sock: socket.socket, payload: bytes) -> dict | None:
        sock.sendall(payload)
        with sock.makefile("rb") as f:
            raw = f.readline()
        if not raw.endswith(b"\n"):
            return None
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise DriverError(f"herdr sent invalid JSON: {exc}", code="bad_reply") from None

    def _result(self, method: str, reply: Any, rid: str) -> dict:
        if not isinstance(reply, dict):
            raise DriverError(f"herdr sent a non-object reply to {method}", code="bad_reply")
        if not reply_matches(reply, rid):
            raise DriverError(
                f"herdr answered {method} (request {rid}) with the reply of "
                f"request {reply.get('id')!r}",
                code="bad_reply",
            )
        if "error" in reply:
            err = reply.get("error") or {}
            code = str(err.get("code") or "herdr_error")
            raise DriverError(
                f"herdr {method}: {err.get('message') or code}",
                code=code,
                retryable=code in RETRYABLE_CODES,
            )
        result = reply.get("result")
        if not isinstance(result, dict):
            raise DriverError(f"herdr sent no result for {method}", code="bad_reply")
        return result

    def subscribe(
        self,
        subscriptions: list[dict],
        stop: threading.Event | None = None,
        on_start: Callable[[], None] | None = None,
    ) -> Iterator[dict]:
        """Yield pushed event envelopes until the server closes the stream (or ``stop``).

        ``on_start`` is called once herdr acknowledged the subscription. herdr 0.9.2+
        ends a subscription whose subscriber fell behind with ``events_lost``: that
        raises a retryable :class:`DriverError` with code ``events_lost``."""
        rid = f"orcr-{os.getpid()}-{next(_ids)}"
        line = {
            "id": rid,
            "method": "events.subscribe",
            "params": {"subscriptions": subscriptions},
        }
        try:
            sock = self._connect(self.timeout)
        except OSError as exc:
            raise self._unavailable(exc.strerror or str(exc)) from exc
        try:
            sock.sendall((json.dumps(line) + "\n").encode())
            f = sock.makefile("rb")
            ack = f.readline()
            if not ack.endswith(b"\n"):
                raise self._unavailable("stream closed before the acknowledgement")
            self._result("events.subscribe", json.loads(ack), rid)
            if on_start is not None:
                on_start()
            sock.settimeout(0.25)
            buf = b""
            while stop is None or not stop.is_set():
                try:
                    chunk = sock.recv(65536)
                except TimeoutError:
                    continue
                if not chunk:
                    return
                buf += chunk
                while b"\n" in buf:
                    raw, buf = buf.split(b"\n", 1)
                    if raw.strip():
                        msg = json.loads(raw)
                        if _lost(msg, rid):
                            raise DriverError(
                                "herdr reported events lost on this subscription "
                                f"({(msg.get('error') or {}).get('message') or 'events_lost'}); "
                                "it closes the stream: resubscribe and re-read",
                                code=EVENTS_LOST,
                                retryable=True,
                            )
                        yield msg
        finally:
            sock.close()
