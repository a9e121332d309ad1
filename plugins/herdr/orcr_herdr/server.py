"""orcr's own herdr server: its config, its clean environment, how it is started.

orcr starts ``herdr --session <name> server``: a background server for one
named session, the mode every herdr release orcr supports has (0.9.0 removed
the single-process ``--no-session`` TUI mode; orcr never used it). The server
starts from a clean environment on every version: herdr 0.9.2 stopped passing
Claude Code's markers and the host terminal's session ids into new panes, but
0.8 does not, and a pane's ``env`` can override a variable, never remove it.
"""

from __future__ import annotations

import errno
import os
import shutil
import socket
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from orcr_herdr.versions import REQUIRED_VERSION

HERDR_CONFIG = """\
# Written by orcr: the config of orcr's own herdr server (passed as HERDR_CONFIG_PATH).
# orcr relaunches agents itself after a restart, with its own flags.
onboarding = false

[session]
resume_agents_on_restore = false
"""

#: Variables a process inherits when it runs inside someone else's herdr pane.
INHERITED = (
    "HERDR_SOCKET_PATH",
    "HERDR_CLIENT_SOCKET_PATH",
    "HERDR_ENV",
    "HERDR_PANE_ID",
    "HERDR_TAB_ID",
    "HERDR_WORKSPACE_ID",
    "HERDR_BIN_PATH",
    "HERDR_SESSION",
)
#: The host terminal's session markers (herdr #2106's list, #3127's WT_SESSION) and
#: Claude Code's (#4104): a server started from a Claude Code shell or a terminal
#: tab would hand them to every pane, and agents would think they run inside it.
HOST_MARKERS = (
    "CLAUDECODE",
    "TERM_PROGRAM",
    "TERM_PROGRAM_VERSION",
    "TERM_SESSION_ID",
    "LC_TERMINAL",
    "LC_TERMINAL_VERSION",
    "KITTY_WINDOW_ID",
    "KITTY_PID",
    "WEZTERM_PANE",
    "WEZTERM_UNIX_SOCKET",
    "ITERM_SESSION_ID",
    "ITERM_PROFILE",
    "GHOSTTY_RESOURCES_DIR",
    "ALACRITTY_WINDOW_ID",
    "WT_SESSION",
    "HERDR_OUTER_TERM_PROGRAM",
)
HOST_PREFIXES = ("CLAUDE_CODE_",)


def available(config: Any = None) -> tuple[bool, str]:
    """Whether the herdr binary (``herdr.binary``) is on PATH (for ``[driver] name =
    "auto"``); an explicit ``herdr.socket`` is someone else's server: connect only."""
    binary = "herdr"
    if config is None:
        try:
            from orcr_core.config import load

            config = load()
        except Exception:
            config = None
    if config is not None:
        binary = str(config.get("herdr.binary") or "herdr")
        if config.get("herdr.socket"):
            return True, f"herdr.socket = {config.get('herdr.socket')!r} (connect only)"
    found = shutil.which(binary)
    if found:
        return True, f"herdr found at {found}"
    return False, f"herdr binary {binary!r} not found on PATH (needs {REQUIRED_VERSION})"


def clean_env(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` without herdr's pane variables, Claude Code's markers and the
    host terminal's session ids: what orcr's own herdr server starts with."""
    drop = set(INHERITED) | set(HOST_MARKERS)
    return {k: v for k, v in environ.items() if k not in drop and not k.startswith(HOST_PREFIXES)}


def server_argv(binary: str, session: str) -> list[str]:
    """The command that starts orcr's herdr server (the same on 0.8 and 0.9)."""
    return [binary, "--session", session, "server"]


def write_config(path: Path) -> Path:
    """Write :data:`HERDR_CONFIG` to ``path`` atomically unless it is there already."""
    if path.exists() and path.read_text() == HERDR_CONFIG:
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".herdr-config-", suffix=".toml")
    with os.fdopen(fd, "w") as f:
        f.write(HERDR_CONFIG)
    os.replace(tmp, path)
    return path


def running(sock: Path, timeout: float) -> bool:
    """Whether something accepts connections on ``sock`` (herdr's own ``running``)."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(timeout)
    try:
        probe.connect(str(sock))
        return True
    except OSError as exc:
        return exc.errno not in (errno.ENOENT, errno.ECONNREFUSED, errno.ENOTSOCK)
    finally:
        probe.close()
