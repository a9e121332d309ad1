"""Where herdr keeps a session (``src/session.rs``): the config dir and the API socket."""

from __future__ import annotations

import os
from pathlib import Path


def config_dir() -> Path:
    """``$XDG_CONFIG_HOME/herdr`` else ``~/.config/herdr``."""
    base = os.environ.get("XDG_CONFIG_HOME")
    return (Path(base) if base else Path.home() / ".config") / "herdr"


def session_dir(session: str) -> Path:
    """The data dir of a named session (``default`` is the config dir itself)."""
    cfg = config_dir()
    return cfg if session == "default" else cfg / "sessions" / session


def session_socket(session: str) -> Path:
    """The API socket of ``herdr --session <session> server``."""
    return session_dir(session) / "herdr.sock"


def sessions() -> list[tuple[str, Path]]:
    """Every session with a socket file (running or stale), as ``herdr session list``
    finds them: ``default`` (``<cfg>/herdr.sock``) and ``<cfg>/sessions/<name>/``."""
    cfg = config_dir()
    found = []
    if (cfg / "herdr.sock").exists():
        found.append(("default", cfg / "herdr.sock"))
    try:
        names = sorted(os.listdir(cfg / "sessions"))
    except OSError:
        names = []
    for name in names:
        sock = cfg / "sessions" / name / "herdr.sock"
        if name != "default" and sock.exists():
            found.append((name, sock))
    return found
