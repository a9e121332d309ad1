"""The network allowlist: an HTTP proxy outside the sandbox and a bridge inside it.

A sandbox with ``allow_net`` hosts has a network namespace of its own (no way out).
Inside, the bridge listens on ``127.0.0.1:3128`` and forwards each connection to a unix
socket in the agent's data dir; outside, the proxy on that socket reads one request
head, ``CONNECT host:port`` (HTTPS) or an absolute ``GET http://host:port/...``,
connects only when ``host:port`` is allowed, and then relays bytes both ways. A refused
request gets ``403`` with the reason. The agent's ``HTTPS_PROXY``/``HTTP_PROXY`` name
the bridge; a program that ignores them reaches nothing at all.

Each runs in a process forked by the launcher (:mod:`enter`) and ends when the
process it was forked from has gone. Standard library only.
"""

from __future__ import annotations

import os
import socket
import threading
import time

#: where the bridge listens inside the sandbox (its own loopback: no clash possible)
BRIDGE_PORT = 3128
#: ports a bare host (no :port) allows
DEFAULT_PORTS = (443, 80)
_HEAD_MAX = 64 * 1024


def _split(entry: str) -> tuple[str, str]:
    """``host``, ``host:port``, ``[v6]:port`` as (host, port or "")."""
    if entry.startswith("["):
        host, _, rest = entry[1:].partition("]")
        return host, rest[1:] if rest.startswith(":") else ""
    if entry.count(":") == 1:
        host, port = entry.split(":")
        return host, port
    return entry, ""


def allowed(host: str, port: int, allow: list[str]) -> bool:
    """Whether ``host:port`` is in ``allow`` (``host``: ports 443 and 80; ``host:port``)."""
    host = host.strip("[]").lower().rstrip(".")
    for entry in allow:
        name, want = _split(entry)
        if name.lower().rstrip(".") == host and (
            int(want) == port if want else port in DEFAULT_PORTS
        ):
            return True
    return False


def _relay(a: socket.socket, b: socket.socket) -> None:
    def pump(src, dst):
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (dst, src):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    t = threading.Thread(target=pump, args=(b, a), daemon=True)
    t.start()
    pump(a, b)
    t.join()
    a.close()
    b.close()


def _read_head(conn: socket.socket) -> bytes:
    head = b""
    while b"\r\n\r\n" not in head and len(head) < _HEAD_MAX:
        data = conn.recv(4096)
        if not data:
            break
        head += data
    return head


def _refuse(conn: socket.socket, why: str) -> None:
    body = f"orcr sandbox: {why}\n".encode()
    conn.sendall(
        b"HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nConnection: close\r\n"
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    conn.close()


def _target(head: bytes) -> tuple[str, str, int, bytes] | None:
    """(method, host, port, head to send upstream) of a request head, or None."""
    line, _, rest = head.partition(b"\r\n")
    parts = line.decode("latin-1").split(" ")
    if len(parts) != 3:
        return None
    method, uri, version = parts
    if method == "CONNECT":
        host, _, port = uri.rpartition(":")
        return (method, host, int(port), b"") if port.isdigit() and host else None
    if not uri.startswith("http://"):
        return None
    hostport, slash, path = uri[len("http://") :].partition("/")
    host, colon, port = hostport.rpartition(":")
    if not colon or not port.isdigit():
        host, port = hostport, "80"
    upstream = f"{method} /{path if slash else ''} {version}\r\n".encode("latin-1") + rest
    return method, host, int(port), upstream


def _serve_one(conn: socket.socket, allow: list[str]) -> None:
    try:
        head = _read_head(conn)
        target = _target(head)
        if target is None:
            return _refuse(conn, "only CONNECT and http:// requests pass this proxy")
        method, host, port, upstream = target
        if not allowed(host, port, allow):
            return _refuse(conn, f"{host}:{port} is not in allow_net ({', '.join(allow)})")
        try:
            out = socket.create_connection((host.strip("[]"), port), timeout=30)
            out.settimeout(None)
        except OSError as exc:
            conn.sendall(f"HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\n\r\n{exc}\n".encode())
            return conn.close()
        if method == "CONNECT":
            conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:
            out.sendall(upstream)
        _relay(conn, out)
    except OSError:
        conn.close()


def _watch_parent(parent: int, cleanup=None) -> None:
    """End this process once the one it was forked from is gone."""
    while os.getppid() == parent:
        time.sleep(0.5)
    if cleanup:
        cleanup()
    os._exit(0)


def _accept_loop(listener: socket.socket, handle) -> None:
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=handle, args=(conn,), daemon=True).start()


def _fork_server(listener: socket.socket, handle, cleanup=None) -> None:
    """Serve ``listener`` in a forked child that outlives nothing; the parent goes on."""
    parent = os.getpid()
    if os.fork() == 0:
        try:
            threading.Thread(target=_watch_parent, args=(parent, cleanup), daemon=True).start()
            _accept_loop(listener, handle)
        finally:
            os._exit(0)
    listener.close()


def start_proxy(path: str, allow: list[str]) -> None:
    """Outside the sandbox: the filtering proxy on unix socket ``path``."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)
    listener.listen(64)

    def cleanup():
        try:
            os.unlink(path)
        except OSError:
            pass

    _fork_server(listener, lambda conn: _serve_one(conn, allow), cleanup)


def start_bridge(path: str, port: int = BRIDGE_PORT) -> None:
    """Inside the sandbox: ``127.0.0.1:port`` forwarded to the proxy's socket."""
    listener = socket.create_server(("127.0.0.1", port))

    def handle(conn):
        try:
            out = socket.socket(socket.AF_UNIX)
            out.connect(path)
        except OSError:
            return conn.close()
        _relay(conn, out)

    _fork_server(listener, handle)
