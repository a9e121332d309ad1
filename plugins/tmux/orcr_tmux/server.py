"""The tmux driver's server: is tmux there and new enough, and a server whose socket
file was deleted (asked to recreate it; an outage, never "no panes")."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
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


class ServerMixin:
    """Mixed into :class:`orcr_tmux.driver.TmuxDriver` (its ``tmux``, ``_version``,
    ``_server_pid`` and ``_lock``)."""

    # -- availability and version ---------------------------------------------------------

    @classmethod
    def available(cls, config: Any = None) -> tuple[bool, str]:
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

    def handshake(self) -> dict[str, Any]:
        text = self.tmux.version()
        if not version_ok(text):
            raise DriverError(
                f"{text} is not supported: orcr needs tmux >= 3.2; {INSTALL_HINT}",
                code="unsupported_version",
            )
        with self._lock:
            self._version = text.removeprefix("tmux ").strip()
        return {"version": self._version, "protocol": None, "socket": self.tmux.socket}

    def ensure_session(self) -> None:
        """Check tmux is usable. The server itself starts with the first workspace;
        a socket path whose directory is gone is an outage (retryable)."""
        if self._version is None:
            self.handshake()
        self.tmux.check_socket_dir()
        pid, sock = self._server_pid, self.tmux.socket
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

    def _socket_gone_or_none(self, exc: TmuxError) -> None:
        """Raise (retryable) when the tmux server last seen still runs: its socket
        is gone, not its panes. Return when there is no such server."""
        pid = self._server_pid
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
