"""The socket client shared by the CLI and the SDK.

Import-light on purpose: this is the CLI's client path, so it imports neither
peewee, pluggy nor croniter (tests/test_plugins.py::test_client_path_imports_no_heavy_modules
checks), and what only a missing or starting server needs (the lock file, the
data directory's paths, subprocess) is imported when that happens.
"""

from __future__ import annotations

import _socket  # socket.py's wrapper (its enums, selectors) costs ms at every CLI start
import itertools
import json
import os
import sys
import time

from orcr_core.common.backoff import Backoff
from orcr_core.protocol import PROTOCOL_VERSION, LineReader, ProtocolError, encode

TYPE_CHECKING = False  # typing costs milliseconds at every CLI start
if TYPE_CHECKING:
    import subprocess
    from collections.abc import Iterator
    from pathlib import Path

    from orcr_core.server import lockfile

START_TIMEOUT = 15.0
#: the longest a request waits for its reply: a server that does not answer in
#: this time is reported (``server_not_answering``), never waited on for ever
REPLY_TIMEOUT = 120.0
STOP_WAIT = 30.0  # a stopping server's recovery-free shutdown takes well under a second
SOCKET_GRACE = 1.0  # a running server recreates a deleted socket within 0.5 s
HANDSHAKE_RETRY = 30.0  # a server that dies mid-hello: how long to look for the next one
#: the longest the connect and the hello wait: a server that accepted and does not
#: answer a hello in this time (SIGSTOPped, wedged) is reported, never waited on
HELLO_TIMEOUT = 5.0


class ServerError(Exception):
    """An error reply from the server, or no server at all."""

    def __init__(self, code: str, message: str, cause: str | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.cause = cause


def _spawn_server() -> subprocess.Popen:
    import subprocess

    from orcr_core import dirs

    try:
        dirs.require_writable(dirs.data_dir())
        run = dirs.ensure_private_dir(dirs.run_dir())
        log = open(run / "server.log", "ab")
    except dirs.Unwritable as exc:
        raise ServerError("home_unwritable", str(exc)) from None
    except OSError as exc:
        raise ServerError("home_unwritable", dirs.unwritable(dirs.run_dir(), exc)) from None
    proc = subprocess.Popen(
        [sys.executable, "-m", "orcr_core.server"],
        # the server's mark, inherited by all it starts: a loop run's supervisor never
        # kills a process carrying it (a run's orcr call may be what started the server)
        env=dict(os.environ, ORCR_SERVER_TREE="1"),
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=log,
        start_new_session=True,
        close_fds=True,
        cwd="/",  # a daemon must not pin the user's directory; ORCR_HOME is absolute by now
    )
    log.close()
    return proc


def _last_error(log: Path) -> str:
    """The last ERROR line of the server log: why a server we started exited."""
    try:
        lines = log.read_text(errors="replace").splitlines()[-50:]
    except OSError:
        return ""
    errors = [ln.split(" ERROR ", 1)[1] for ln in lines if " ERROR " in ln]
    return errors[-1] if errors else ""


class Client:
    """One persistent connection. ``autostart`` starts a server when none runs."""

    def __init__(self, socket_path: Path | str | None = None, autostart: bool = True):
        if not socket_path:
            from orcr_core import dirs

            socket_path = dirs.socket_path()
        self.path = socket_path
        self.autostart = autostart
        self.reply_timeout = REPLY_TIMEOUT
        self._ids = itertools.count(1)
        self.sock: _socket.socket | None = None
        self.server_info: dict = {}

    def _connect_once(self) -> _socket.socket:
        s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        s.settimeout(HELLO_TIMEOUT)  # a full backlog of a stopped server blocks connect
        try:
            s.connect(str(self.path))
        except TimeoutError:
            s.close()
            raise self._not_answering("the connection") from None
        except OSError:
            s.close()
            raise
        s.settimeout(None)  # replies set their own; a stream waits as long as it wants
        return s

    def _not_answering(self, what: str) -> ServerError:
        """``server_not_answering`` for a handshake: names the server's pid, and
        says so when that process is stopped (SIGSTOP, a debugger, ``^Z``)."""
        from orcr_core.server import lockfile

        held = lockfile.holder()
        who = f"the orcr server at {self.path}"
        if held is not None and held.pid is not None and self._listens_here(held):
            who = f"the orcr server (pid {held.pid}) at {self.path}"
            if _stopped(held.pid):
                return ServerError(
                    "server_not_answering",
                    f"{who} did not answer {what} within {HELLO_TIMEOUT:.0f}s: its process is "
                    f"stopped; resume it with kill -CONT {held.pid}",
                )
        return ServerError(
            "server_not_answering",
            f"{who} did not answer {what} within {HELLO_TIMEOUT:.0f}s; "
            f"see {_run_dir() / 'server.log'} and orcr doctor",
        )

    def connect(self) -> Client:
        """Connect and say hello. A server that accepted and then went away before it
        answered (SIGKILLed, stopping) is not an answer: connect again, to the server
        that replaces it (``autostart`` starts one, as for any verb), for up to
        ``HANDSHAKE_RETRY`` seconds."""
        if self.sock is not None:
            return self
        backoff = Backoff(0.05, 1.0, give_up_after=HANDSHAKE_RETRY)
        while True:
            try:
                return self._connect_and_hello()
            except ServerError as exc:
                if exc.code != "connection_closed" or backoff.expired():
                    raise
                self.close()
            time.sleep(backoff.next())

    def _connect_and_hello(self) -> Client:
        try:
            self.sock = self._connect_once()
        except (FileNotFoundError, ConnectionRefusedError, NotADirectoryError):
            from orcr_core.server import lockfile

            held = lockfile.holder()
            if held is not None and held.stopping:
                self._wait_stopped(held)
            elif held is not None and held.listening and not self._listens_here(held):
                raise ServerError(
                    "socket_missing",
                    f"no orcr server listens at {self.path} (ORCR_SOCKET); this home's "
                    f"server (pid {held.pid}) listens at {held.socket}: unset ORCR_SOCKET "
                    "or point it there",
                ) from None
            elif held is not None and held.listening:
                self._socket_gone(held)
            elif held is not None:  # a server is starting (recovery runs before the socket)
                self._wait_for(None, f"the orcr server {held.pid} is starting")
            elif not self.autostart:
                raise ServerError(
                    "server_not_running",
                    f"no orcr server at {self.path}; start one: orcr server start",
                ) from None
            else:
                self._wait_for(_spawn_server(), "")
        self.reader = LineReader(self.sock)
        timeout, self.reply_timeout = self.reply_timeout, min(self.reply_timeout, HELLO_TIMEOUT)
        try:
            self.server_info = self.call("hello", protocol=PROTOCOL_VERSION)
        except ServerError as exc:
            if exc.code == "server_not_answering":
                raise self._not_answering("its hello") from None
            raise
        finally:
            self.reply_timeout = timeout
        return self

    def _listens_here(self, held: lockfile.Holder) -> bool:
        """Does the home's server listen at our path? (Unknown: assume so.)"""
        if not held.socket:
            return True
        try:
            return os.path.abspath(held.socket) == os.path.abspath(self.path)
        except (OSError, ValueError):
            return True

    def _wait_stopped(self, held: lockfile.Holder) -> None:
        """A server is stopping (``orcr server stop``, SIGTERM): its socket is already
        gone. Wait for it to exit, then start a new one as any verb does (``autostart``)."""
        from orcr_core.server import lockfile

        deadline = time.monotonic() + STOP_WAIT
        while (now := lockfile.holder()) is not None and now.stopping:
            if time.monotonic() > deadline:
                raise ServerError(
                    "server_stopping",
                    f"the orcr server (pid {held.pid}) is stopping and has not exited within "
                    f"{STOP_WAIT:.0f}s; see {_run_dir() / 'server.log'}",
                )
            time.sleep(0.05)
        if not self.autostart:
            raise ServerError(
                "server_not_running",
                f"the orcr server (pid {held.pid}) stopped; start one: orcr server start",
            )
        self._wait_for(_spawn_server(), "")

    def _socket_gone(self, held: lockfile.Holder) -> None:
        """A server holds the lock and said it listens, but its socket file is gone
        (deleted by hand): it recreates it within a second; else say so at once."""
        deadline = time.monotonic() + SOCKET_GRACE
        while time.monotonic() < deadline:
            time.sleep(0.05)
            try:
                self.sock = self._connect_once()
                return
            except (FileNotFoundError, ConnectionRefusedError, NotADirectoryError):
                continue
        raise ServerError(
            "socket_missing",
            f"an orcr server holds the lock but its socket {self.path} is gone "
            f"(pid {held.pid}); restart it: orcr server stop, then orcr server start",
        )

    def _wait_for(self, proc: subprocess.Popen | None, what: str) -> None:
        """Wait until the socket answers: a server we spawned (``proc``), or one
        that holds the lock and is still starting."""
        from orcr_core.server import lockfile

        log = _run_dir() / "server.log"
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            try:
                self.sock = self._connect_once()
                return
            except (FileNotFoundError, ConnectionRefusedError, NotADirectoryError):
                if proc is not None and proc.poll() not in (None, 0):  # 0: another's won
                    raise ServerError(
                        "server_start_failed",
                        f"the orcr server exited: {_last_error(log) or 'see ' + str(log)}",
                    ) from None
                if proc is None and lockfile.holder() is None:
                    raise ServerError(
                        "server_start_failed",
                        f"{what} but exited: {_last_error(log) or 'see ' + str(log)}",
                    ) from None
                if time.monotonic() > deadline:
                    raise ServerError(
                        "server_start_failed",
                        f"the orcr server did not start within {START_TIMEOUT:.0f}s; see {log}",
                    ) from None
                time.sleep(0.02)

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def __enter__(self) -> Client:
        return self.connect()

    def __exit__(self, *exc) -> None:
        self.close()

    def _live(self) -> _socket.socket:
        """The connected socket; an error naming the fix when ``connect()`` was not called
        or the connection was closed."""
        if self.sock is None:
            raise ServerError(
                "not_connected", "this Client is not connected; call connect() (or use `with`)"
            )
        return self.sock

    def settimeout(self, timeout: float | None) -> None:
        """Bound the next ``recv()`` (None: block)."""
        self._live().settimeout(timeout)

    def send(self, method: str, **params) -> int:
        rid = next(self._ids)
        try:
            self._live().sendall(encode({"id": rid, "method": method, "params": params}))
        except OSError as exc:  # the server closed on us: its last reply says why, if any
            raise self._closed_error(exc) from None
        return rid

    def send_many(self, method: str, params: list[dict]) -> list[int]:
        """Several requests in one write (pipelining): their ids, in order."""
        rids = [next(self._ids) for _ in params]
        data = b"".join(
            encode({"id": rid, "method": method, "params": p})
            for rid, p in zip(rids, params, strict=True)
        )
        try:
            self._live().sendall(data)
        except OSError as exc:
            raise self._closed_error(exc) from None
        return rids

    def _closed_error(self, exc: OSError) -> ServerError:
        """The error the server sent before it closed the connection, else a plain one."""
        try:
            self._live().settimeout(1.0)
            line = self.reader.readline()
            msg = json.loads(line) if line else None
        except (OSError, ValueError, ProtocolError):
            msg = None
        if isinstance(msg, dict) and isinstance(msg.get("error"), dict):
            e = msg["error"]
            return ServerError(e.get("code", "error"), e.get("message", ""), e.get("cause"))
        return ServerError(
            "connection_closed", f"the orcr server closed the connection ({exc.strerror or exc})"
        )

    def _reply(self, method: str) -> dict:
        """The next frame, within ``reply_timeout`` seconds."""
        sock = self._live()
        before = sock.gettimeout()
        sock.settimeout(self.reply_timeout)
        try:
            return self.recv()
        except TimeoutError:
            self.close()  # a late reply would answer the wrong request
            raise ServerError(
                "server_not_answering",
                f"the orcr server did not answer {method} within {self.reply_timeout:.0f}s; "
                f"see {_run_dir() / 'server.log'} and orcr doctor",
            ) from None
        finally:
            if self.sock is not None:
                self.sock.settimeout(before)

    def recv(self) -> dict:
        try:
            line = self.reader.readline()
        except ProtocolError as exc:
            raise ServerError(exc.code, exc.message) from None
        except (ConnectionResetError, BrokenPipeError) as exc:
            raise ServerError(
                "connection_closed", f"the orcr server closed the connection ({exc.strerror})"
            ) from None
        if line is None:
            raise ServerError("connection_closed", "the orcr server closed the connection")
        return json.loads(line)

    def call(self, method: str, **params):
        if self.sock is None:
            self.connect()
        rid = self.send(method, **params)
        msg = self._reply(method)
        if msg.get("id") is None and "error" in msg:  # a connection-level refusal
            e = msg["error"]
            raise ServerError(e.get("code", "error"), e.get("message", ""), e.get("cause"))
        if msg.get("id") != rid:
            raise ServerError("protocol_error", f"reply id {msg.get('id')} for request {rid}")
        if "error" in msg:
            e = msg["error"]
            raise ServerError(e.get("code", "error"), e.get("message", ""), e.get("cause"))
        return msg.get("result")

    def stream(self, method: str, **params) -> tuple[dict, Iterator[dict]]:
        """Open a stream (``watch.open``): the first reply, then an event iterator."""
        first = self.call(method, **params)

        def events() -> Iterator[dict]:
            while True:
                msg = self.recv()
                if "error" in msg:
                    e = msg["error"]
                    raise ServerError(e.get("code", "error"), e.get("message", ""), e.get("cause"))
                if "event" in msg:
                    yield msg["event"]

        return first, events()


def _stopped(pid: int) -> bool:
    """Is process ``pid`` stopped (state ``T``: SIGSTOP, ``^Z``, a tracer)?"""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[:1] in (["T"], ["t"])


def call_once(method: str, timeout: float, socket_path: Path | None = None, **params):
    """One request to the server running now, without retries: it never starts a
    server, never reads the lock to wait for one that is starting or stopping, and
    waits at most ``timeout`` seconds for the connection and for each reply (hello,
    then ``method``). Returns the result; raises OSError when no server accepts and
    ServerError for anything else (an error reply, a closed connection, no answer)."""
    client = Client(socket_path, autostart=False)
    client.reply_timeout = timeout
    client.sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        client.sock.settimeout(timeout)
        client.sock.connect(str(client.path))
        client.reader = LineReader(client.sock)
        client.server_info = client.call("hello", protocol=PROTOCOL_VERSION)
        return client.call(method, **params)
    finally:
        client.close()


def _run_dir() -> Path:
    from orcr_core import dirs

    return dirs.run_dir()


def scope_from_env() -> str | None:
    return os.environ.get("ORCR_PATH") or None
