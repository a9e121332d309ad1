"""The tmux driver's server part: is tmux there and new enough, and a server whose
socket file was deleted (asked to recreate it; an outage, never "no panes")."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import threading
from typing import Any

from orcr_core.contracts import DriverError
from orcr_tmux.tmuxcli import INSTALL_HINT, Tmux, TmuxError, version_ok


def _tmux_server_alive(pid: int) -> bool:
    """Whether ``pid`` is a live tmux server (``/proc`` names it; elsewhere any live pid)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False  # not ours: the pid was reused
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().startswith("tmux")
    except OSError:
        return True


def available(config: Any = None) -> tuple[bool, str]:
    """Whether tmux >= 3.2 (``[tmux] binary``) is on PATH (for ``[driver] name = "auto"``)."""
    binary = str(config.get("tmux.binary") or "tmux") if config is not None else "tmux"
    path = shutil.which(binary)
    if path is None:
        return False, f"{binary} not found on PATH; {INSTALL_HINT}"
    try:
        text = Tmux(binary=path).version()
    except DriverError as exc:
        return False, str(exc)
    if not version_ok(text):
        return False, f"{text} at {path} is too old; {INSTALL_HINT}"
    return True, f"{text} at {path}"


class TmuxServer:
    """orcr's tmux server as the driver sees it: its version (once a handshake read
    it) and the pid of the server last seen answering, which tells a server whose
    socket file was deleted (an outage) from no server at all (no panes).

    A part of :class:`orcr_tmux.driver.TmuxDriver`, shared with its pane listing
    (:class:`orcr_tmux.snapshot.Panes`), which reports the pids it sees through
    :meth:`seen`."""

    def __init__(self, tmux: Tmux):
        self.tmux = tmux
        self.version: str | None = None
        self.pid: int | None = None  # the tmux server last seen answering
        self._lock = threading.Lock()

    def seen(self, pid: int) -> None:
        """A listing was answered by the tmux server ``pid``."""
        self.pid = pid

    def handshake(self) -> dict[str, Any]:
        text = self.tmux.version()
        if not version_ok(text):
            raise DriverError(
                f"{text} is not supported: orcr needs tmux >= 3.2; {INSTALL_HINT}",
                code="unsupported_version",
            )
        with self._lock:
            self.version = text.removeprefix("tmux ").strip()
        return {"version": self.version, "protocol": None, "socket": self.tmux.socket}

    def ensure_usable(self) -> None:
        """Check tmux is usable. The server itself starts with the first workspace;
        a socket path whose directory is gone is an outage (retryable)."""
        if self.version is None:
            self.handshake()
        self.tmux.check_socket_dir()
        pid, sock = self.pid, self.tmux.socket
        if pid and "/" in sock and not os.path.exists(sock) and _tmux_server_alive(pid):
            # its directory is back, its socket not yet: never start a second server there
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGUSR1)
            raise DriverError(
                f"the tmux server (pid {pid}) runs but its socket {sock} is gone; asked it "
                "to recreate its socket",
                code="tmux_socket_gone",
                retryable=True,
            )

    def socket_gone_or_none(self, exc: TmuxError) -> None:
        """Raise (retryable) when the tmux server last seen still runs: its socket
        is gone, not its panes. Return when there is no such server."""
        pid = self.pid
        # a socket file still there but refusing belongs to a server that exited
        # (or is exiting: kill-server); only a missing socket file can hide a live one
        gone = "No such file or directory" in str(exc)
        if pid is None or not gone or not _tmux_server_alive(pid):
            return
        try:
            os.kill(pid, signal.SIGUSR1)  # tmux recreates its socket on SIGUSR1
        except OSError:
            pass
        raise DriverError(
            f"the tmux server (pid {pid}) runs but its socket {self.tmux.socket} is gone "
            f"({exc}); asked it to recreate its socket",
            code="tmux_socket_gone",
            retryable=True,
        ) from exc
