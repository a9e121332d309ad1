"""Each sandboxed agent's own orcr socket: the server knows the caller by the socket.

orcr's socket is hidden inside a sandbox (through it an agent could run anything
unconfined). A sandboxed agent gets a socket of its own instead: ``run/sbx/<uuid>/
orcr.sock``, made by the server before the agent's pane starts (and again for every
live sandboxed agent when the server starts), bound read-only into the sandbox at
``/run/orcr`` with ``ORCR_SOCKET`` naming it. A connection accepted on it is the
agent's (``Connection.caller``): nothing the agent sends says who it is, so it cannot
claim to be another agent or the user. The socket's folder is 0700 inside orcr's 0700
``run/`` and the socket 0600, and the peer's uid is checked as on orcr's own socket:
the user's alone. What a caller may do: :mod:`orcr_core.server.sandboxed`.
docs/decisions.md says why this and not a token or the peer's pid.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import threading
from typing import TYPE_CHECKING

from orcr_core import dirs

if TYPE_CHECKING:
    from orcr_core.server.context import ServerContext

log = logging.getLogger("orcr.server")

NAME = "orcr.sock"


class AgentSockets:
    """The open per-agent sockets of one server: uuid -> listening socket."""

    def __init__(self, server: ServerContext):
        self.server = server
        self.lock = threading.Lock()
        self.open: dict[str, socket.socket] = {}

    @property
    def root(self):
        return self.server.socket_path.parent / "sbx"

    def ensure(self, uuid: str, folder: str | None) -> None:
        """Listen on the agent's socket in ``folder`` (its policy's ``socket_dir``)
        unless it already does; the ended agents' sockets are closed on the way."""
        if not folder:
            return  # a policy recorded before agents had sockets
        self.sweep()
        with self.lock:
            if uuid in self.open and os.path.exists(os.path.join(folder, NAME)):
                return
            self._close(uuid)
            dirs.ensure_private_dir(self.root)
            os.makedirs(folder, mode=0o700, exist_ok=True)
            os.chmod(folder, 0o700)
            sock = _bind(folder)
            self.open[uuid] = sock
        threading.Thread(
            target=self._serve, args=(uuid, sock), name="orcr-agent-sock", daemon=True
        ).start()

    def _serve(self, uuid: str, sock: socket.socket) -> None:
        from orcr_core.server.listener import Connection

        while not self.server.stopping.is_set():
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            c = Connection(self.server, conn, caller=uuid)
            threading.Thread(target=c.run, name="orcr-conn", daemon=True).start()

    def _close(self, uuid: str) -> None:
        sock = self.open.pop(uuid, None)
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)  # wakes the accept
            except OSError:
                pass
            sock.close()

    def close(self, uuid: str) -> None:
        """Stop serving the agent and remove its socket's folder."""
        with self.lock:
            self._close(uuid)
        shutil.rmtree(self.root / uuid, ignore_errors=True)

    def sweep(self) -> None:
        """Close the sockets of agents that ended (or whose row is gone)."""
        from orcr_core.store.models import Agent

        with self.lock:
            live = list(self.open)
        if not live:
            return
        ended = set(live) - {
            a.uuid
            for a in Agent.select(Agent.uuid).where(Agent.uuid.in_(live), Agent.status != "ended")
        }
        for uuid in ended:
            self.close(uuid)

    def restore(self) -> None:
        """At the server's start: serve again every live sandboxed agent's socket (a
        folder bound into a running sandbox shows the new one), remove the others."""
        from orcr_core.agents.launch import launch_info
        from orcr_core.store.models import Agent

        if not self.root.is_dir():
            return
        for entry in os.listdir(self.root):
            row = Agent.get_or_none(Agent.uuid == entry)
            folder = None
            if row is not None and row.status != "ended":
                try:
                    folder = (launch_info(self.server, row).get("sandbox") or {}).get("socket_dir")
                except (OSError, ValueError):
                    folder = None
            if folder and os.path.abspath(folder) == str(self.root / entry):
                self.ensure(entry, folder)
            else:
                shutil.rmtree(self.root / entry, ignore_errors=True)

    def close_all(self) -> None:
        with self.lock:
            for uuid in list(self.open):
                self._close(uuid)


def _bind(folder: str) -> socket.socket:
    """A 0600 listening socket ``folder/orcr.sock`` (a stale one replaced). A path past
    the 107 bytes a unix socket's name may have is bound through ``/proc/self/fd``."""
    path = os.path.join(folder, NAME)
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    fd = None
    try:
        if len(os.fsencode(path)) < 100:
            sock.bind(path)
        else:
            fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
            sock.bind(f"/proc/self/fd/{fd}/{NAME}")
    finally:
        os.umask(old)
        if fd is not None:
            os.close(fd)
    os.chmod(path, 0o600)
    sock.listen(16)
    return sock
