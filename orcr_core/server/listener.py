"""The Unix socket: 0600 in a 0700 directory, peer uid checked, one thread per connection."""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import struct
import threading
from typing import TYPE_CHECKING

from orcr_core import dirs
from orcr_core.protocol import SUPPORTED, LineReader, ProtocolError, encode
from orcr_core.server import handlers
from orcr_core.server.stream_handlers import STREAMED
from orcr_core.store import durable, health
from orcr_core.store.models import db

if TYPE_CHECKING:
    from orcr_core.server.context import ServerContext

log = logging.getLogger("orcr.server")


GROUP_MAX = 256
_RUN = b'"method":"agent.run"'


class _Answering:
    """Requests being answered. A server that found its store damaged exits at once
    (no checkpoint into the file), but first lets them send their answer: the
    request that found the damage said ``store_corrupted``, not a closed connection."""

    def __init__(self) -> None:
        self.count = 0
        self.cond = threading.Condition()

    def __enter__(self) -> None:
        with self.cond:
            self.count += 1

    def __exit__(self, *exc) -> None:
        with self.cond:
            self.count -= 1
            self.cond.notify_all()

    def drain(self, timeout: float) -> None:
        """Wait until none is being answered (a stream never is done), up to ``timeout``."""
        with self.cond:
            self.cond.wait_for(lambda: self.count == 0, timeout)


ANSWERING = _Answering()


def _is_run(line: bytes | None) -> bool:
    """Is this frame an ``agent.run`` request? A cheap substring look first (the
    compact encoding orcr's client sends), then a real parse."""
    if line is None or _RUN not in line:
        return False
    try:
        msg = json.loads(line)
    except ValueError:
        return False
    return isinstance(msg, dict) and msg.get("method") == "agent.run"


def peer_uid(conn: socket.socket) -> int:
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return uid


class Connection:
    def __init__(self, server: ServerContext, sock: socket.socket, caller: str | None = None):
        self.server = server
        self.sock = sock
        #: the sandboxed agent whose own socket this came through (agent_sockets), else
        #: None: orcr's socket, the user
        self.caller = caller
        self.reader = LineReader(sock)
        self.negotiated = False
        self.lock = threading.Lock()
        self.deferred: list[dict] | None = None

    def send(self, obj: dict) -> None:
        if self.deferred is not None:  # inside a group: answered after the commit
            self.deferred.append(obj)
            return
        with self.lock:
            self.sock.sendall(encode(obj))

    def error(self, rid, exc: ProtocolError) -> None:
        self.send({"id": rid, "error": exc.to_dict()})

    def run(self) -> None:
        try:
            db.connect(reuse_if_open=True)  # (inside: a failure still closes the socket)
            if peer_uid(self.sock) != os.getuid():
                self.error(
                    None, ProtocolError("forbidden", "the orcr socket serves its owner only")
                )
                return
            while not self.server.stopping.is_set():
                try:
                    line = self.reader.readline()
                except ProtocolError as exc:
                    self.error(None, exc)
                    return
                if line is None:
                    return
                if not line.strip():
                    continue
                with ANSWERING:
                    if self.negotiated and _is_run(line) and _is_run(self.reader.peek_line()):
                        self.admit_group(line)
                        continue
                    if not self.handle_line(line):
                        return
            self._refuse_if_store_broken()  # a request read as the server stopped
        except (BrokenPipeError, ConnectionResetError):
            pass
        except Exception as exc:
            if not self.server.store_error(exc):
                log.exception("connection failed")
            self._refuse_if_store_broken()
        finally:
            self.sock.close()
            db.close()

    def _refuse_if_store_broken(self) -> None:
        if self.server.store_broken:
            try:
                self.error(None, ProtocolError("store_corrupted", self.server.failure or ""))
            except OSError:
                pass

    def admit_group(self, first: bytes) -> None:
        """Group commit for pipelined admissions.

        When a client has several ``agent.run`` requests in flight, the ones
        already buffered are admitted in one transaction (each in its own
        savepoint, so a refused one costs the others nothing) and answered after
        the single commit: durability per reply is unchanged, the commit and
        its WAL pages are paid once.
        """
        lines = [first]
        while len(lines) < GROUP_MAX and _is_run(self.reader.peek_line()):
            lines.append(self.reader.readline())
        self.deferred: list[dict] = []
        try:
            with db.atomic("IMMEDIATE"):
                for line in lines:
                    self.handle_line(line)
                # the group's launch.json files, data dirs and their entries in
                # agents/, synced together: on disk before the commit
                durable.sync_dirs_with_file(
                    [
                        str(self.server.agents_dir / r["result"]["uuid"])
                        for r in self.deferred
                        if "result" in r
                    ],
                    "launch.json",
                )
        except Exception as exc:  # the commit failed: no admission of the group stands
            log.exception("group admission failed")
            for reply in self.deferred:
                if "result" in reply:
                    shutil.rmtree(
                        self.server.agents_dir / reply["result"]["uuid"], ignore_errors=True
                    )
            full = health.disk_full(exc, self.server.store_path)
            code, message = (
                ("disk_full", f"{full}; free space there and retry")
                if full
                else ("server_error", f"admission failed: {exc}")
            )
            replies = [
                {"id": r["id"], "error": {"code": code, "message": message}} for r in self.deferred
            ]
        else:
            replies = self.deferred
        finally:
            self.deferred = None
        handlers.admitted(self.server)
        with self.lock:
            self.sock.sendall(b"".join(encode(r) for r in replies))

    def handle_line(self, line: bytes) -> bool:
        """Handle one request. False ends the connection (streams end it themselves)."""
        try:
            msg = json.loads(line)
        except (ValueError, UnicodeDecodeError) as exc:
            self.error(None, ProtocolError("invalid_json", f"frame is not JSON: {exc}"))
            return True
        if not isinstance(msg, dict) or not isinstance(msg.get("method"), str):
            rid = msg.get("id") if isinstance(msg, dict) else None
            self.error(rid, ProtocolError("invalid_request", "a request is {id, method, params}"))
            return True
        rid, method = msg.get("id"), msg["method"]
        params = msg.get("params") or {}
        if not isinstance(params, dict):
            self.error(rid, ProtocolError("invalid_params", "params must be an object"))
            return True
        if not self.negotiated:
            if method != "hello":
                self.error(
                    rid,
                    ProtocolError("hello_required", "the first request must be hello {protocol}"),
                )
                return True
            version = params.get("protocol")
            if version not in SUPPORTED:
                self.error(
                    rid,
                    ProtocolError(
                        "unsupported_version",
                        f"protocol {version!r} is not supported by this server (supports "
                        f"{list(SUPPORTED)}); upgrade the older of client and server",
                    ),
                )
                return False
            self.negotiated = True
            self.hello_protocol = version
        if self.server.store_broken and method not in ("hello", "server.stop"):  # at once
            self.error(rid, ProtocolError("store_corrupted", self.server.failure or ""))
            return False
        try:
            result = handlers.dispatch(self.server, self, rid, method, params)
        except ProtocolError as exc:
            self.error(rid, exc)
            return True
        except Exception as exc:  # a bug: answer, log, keep serving
            if self.server.store_error(exc):  # the store is damaged: said once, by the server
                self.error(rid, ProtocolError("store_corrupted", self.server.failure or ""))
                return False
            full = health.disk_full(exc, self.server.store_path)
            if full:  # nothing it wrote stands: the transaction rolled back
                log.warning("%s refused: %s", method, full)
                self.error(rid, ProtocolError("disk_full", f"{full}; free space there and retry"))
                return True
            log.exception("%s failed", method)
            self.error(rid, ProtocolError("server_error", f"{method} failed: {exc}"))
            return True
        if result is STREAMED:
            return False
        self.send({"id": rid, "result": result})
        if method == "server.stop":
            self.server.stop()
        return True


class Listener:
    def __init__(self, server: ServerContext):
        self.server = server
        self.sock: socket.socket | None = None
        self.ident: tuple[int, int] | None = None  # (st_dev, st_ino) of the bound socket

    def bind(self) -> None:
        path = self.server.socket_path
        dirs.ensure_private_dir(path.parent)
        if path.exists():
            path.unlink()  # we hold the server lock: the file is stale
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            sock.bind(str(path))
        finally:
            os.umask(old)
        os.chmod(path, 0o600)
        sock.listen(128)
        st = os.stat(path)
        self.ident = (st.st_dev, st.st_ino)
        self.sock = sock

    def serve(self) -> None:
        sock = self.sock  # a rebind hands the new socket to a new thread
        while not self.server.stopping.is_set():
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            c = Connection(self.server, conn)
            threading.Thread(target=c.run, name="orcr-conn", daemon=True).start()

    def check(self) -> bool:
        """Recreate the socket when its file was deleted or replaced (True when it was).

        A server whose socket file is gone would run on, unreachable, while every
        client waits for it; the path is checked twice a second.
        """
        try:
            st = os.stat(self.server.socket_path)
            if (st.st_dev, st.st_ino) == self.ident:
                return False
        except FileNotFoundError:
            pass
        log.warning("socket %s is gone; recreating it", self.server.socket_path)
        old = self.sock
        self.bind()
        threading.Thread(target=self.serve, name="orcr-listen", daemon=True).start()
        _close_listening(old)
        return True

    def close(self) -> None:
        if self.sock is not None:
            try:
                st = os.stat(self.server.socket_path)
                if (st.st_dev, st.st_ino) == self.ident:  # only our own socket file
                    self.server.socket_path.unlink()
            except FileNotFoundError:
                pass
            _close_listening(self.sock)


def _close_listening(sock: socket.socket | None) -> None:
    """Close a listening socket and wake the thread blocked in its accept()."""
    if sock is None:
        return
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()
