"""herdr's API socket framing: one request line per connection, one answer, close.

Limits from ``src/api/server.rs``: the request line is at most 1 MiB and must
arrive within 5 s of connecting, else the connection is dropped without an
answer; invalid UTF-8 and a blank line are dropped too. Writes to a
subscriber time out after 5 s.
"""

from __future__ import annotations

import json
import os
import select
import socket
import threading
import time
from collections.abc import Callable

MAX_REQUEST_BYTES = 1024 * 1024
REQUEST_TIMEOUT = 5.0
WRITE_TIMEOUT = 5.0


class ApiError(Exception):
    """An error reply: ``{"id":..., "error": {"code", "message"}}``."""

    def __init__(self, code: str, message: str, reply_id: str | None = None):
        super().__init__(message)
        self.code, self.message, self.reply_id = code, message, reply_id


def read_request(conn: socket.socket, timeout: float = REQUEST_TIMEOUT) -> bytes | None:
    """The first line (without ``\\n``), or None when herdr would drop the connection."""
    deadline = time.monotonic() + timeout
    buf = bytearray()
    while True:
        nl = buf.find(b"\n")
        if nl >= 0:
            return bytes(buf[:nl]) if nl <= MAX_REQUEST_BYTES else None
        if len(buf) > MAX_REQUEST_BYTES:
            return None
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        conn.settimeout(left)
        try:
            chunk = conn.recv(65536)
        except (TimeoutError, OSError):
            return None
        if not chunk:  # EOF: herdr reads a line; a final unterminated line still counts
            return bytes(buf) if buf and len(buf) <= MAX_REQUEST_BYTES else None
        buf += chunk


def encode(obj: dict) -> bytes:
    return (json.dumps(obj, separators=(",", ":"), ensure_ascii=False) + "\n").encode()


def send_line(conn: socket.socket, obj: dict, timeout: float = WRITE_TIMEOUT) -> bool:
    try:
        conn.settimeout(timeout)
        conn.sendall(encode(obj))
        return True
    except OSError:
        return False


def peer_gone(conn: socket.socket) -> bool:
    """True once the client closed its end (we never read after the request)."""
    try:
        ready, _, _ = select.select([conn], [], [], 0)
        if not ready:
            return False
        data = conn.recv(4096, socket.MSG_DONTWAIT)
        return data == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def _answers(path: str) -> bool:
    """Whether a server listens on the Unix socket at ``path`` (an inode number cannot
    tell a newer server's file from ours: a freed inode is given out again at once)."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(path)
    except OSError:
        return False
    finally:
        probe.close()
    return True


class Listener:
    """Accepts on a Unix socket and runs ``serve(conn)`` in a thread per connection."""

    def __init__(self, path: str, serve: Callable[[socket.socket], None]):
        self.path, self.serve = path, serve
        self.sock: socket.socket | None = None
        self.stopping = threading.Event()
        self.conns: set[socket.socket] = set()
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        if _answers(self.path):
            raise RuntimeError(f"another server is listening on {self.path}")
        if os.path.lexists(self.path):  # nobody answers: a stale file
            os.unlink(self.path)
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            sock.bind(self.path)
        finally:
            os.umask(old)
        os.chmod(self.path, 0o600)
        sock.listen(128)
        self.sock = sock
        self.thread = threading.Thread(target=self._accept_loop, name="herdr-accept", daemon=True)
        self.thread.start()

    def _accept_loop(self) -> None:
        assert self.sock is not None
        while not self.stopping.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                if self.stopping.is_set():
                    return
                time.sleep(0.01)
                continue
            with self.lock:
                self.conns.add(conn)
            threading.Thread(target=self._run, args=(conn,), daemon=True).start()

    def _run(self, conn: socket.socket) -> None:
        try:
            self.serve(conn)
        finally:
            with self.lock:
                self.conns.discard(conn)
            try:
                conn.close()
            except OSError:
                pass

    def stop(self) -> None:
        """Stop accepting, remove the socket file, cut every open connection."""
        self.stopping.set()
        if self.sock is not None:
            try:
                self.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self.sock.close()
        if not _answers(self.path):  # a server started since owns the file: leave it
            try:
                os.unlink(self.path)
            except OSError:
                pass
        with self.lock:
            conns = list(self.conns)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self.thread is not None:
            self.thread.join(timeout=2)
