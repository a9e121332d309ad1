"""Where orcr keeps things. Import-light: the CLI's client path uses this.

``ORCR_HOME`` moves config, data and the socket under one directory (tests and
several side-by-side instances rely on it). Otherwise platformdirs decides.
"""

from __future__ import annotations

import functools
import os
import threading
from pathlib import Path


def _home() -> Path | None:
    value = os.environ.get("ORCR_HOME")
    if not value:
        return None
    path = Path(value).expanduser().resolve()
    if str(path) != value:
        # Resolved once, against the directory the command runs in: the server
        # (started in /) and every agent's pane inherit the absolute path, so
        # they all mean the same directory.
        os.environ["ORCR_HOME"] = str(path)
    return path


def config_path() -> Path:
    home = _home()
    if home:
        return home / "config.toml"
    import platformdirs

    return Path(platformdirs.user_config_dir("orcr", appauthor=False)) / "config.toml"


def data_dir() -> Path:
    home = _home()
    if home:
        return home
    import platformdirs

    return Path(platformdirs.user_data_dir("orcr", appauthor=False))


def store_path() -> Path:
    return data_dir() / "store.db"


def agents_dir() -> Path:
    return data_dir() / "agents"


def run_dir() -> Path:
    """The 0700 directory holding the socket and the server lock."""
    return data_dir() / "run"


def socket_path() -> Path:
    """``ORCR_SOCKET`` (set in every agent's pane, so an agent's own ``orcr`` calls
    reach the server that started it), else ``run/orcr.sock``."""
    value = os.environ.get("ORCR_SOCKET")
    return Path(value) if value else run_dir() / "orcr.sock"


def instance_id() -> str:
    """This orcr instance's id: a digest of its data directory.

    Marked on every pane orcr starts (with the row's launch token); no cleanup
    ever closes a pane that does not carry both. A copied or moved data
    directory is another instance, so it never claims the original's panes.
    """
    return _instance_id(os.environ.get("ORCR_HOME"))


@functools.lru_cache(maxsize=8)
def _instance_id(_home_env: str | None) -> str:
    import hashlib

    return hashlib.sha256(str(data_dir()).encode()).hexdigest()[:12]


def mux_name() -> str:
    """The default tmux socket name / herdr session of this instance: ``orcr`` for
    the default data directory, ``orcr-<instance id>`` under ``ORCR_HOME``, so two
    instances never share a multiplexer server unless told to."""
    return f"orcr-{instance_id()}" if _home() else "orcr"


class Unwritable(Exception):
    """orcr cannot create files where it keeps its state; the message says which
    directory, why, and the fix, in one line."""


def writable_problem(path: Path) -> str | None:
    """Why orcr could not create files in ``path`` (None when it can).

    Probes by creating a file: permission bits say nothing for root or for a
    read-only mount. A directory that does not exist yet is judged by its
    nearest existing parent, which is left as it was.
    """
    probe = path
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    try:
        if not probe.is_dir():
            raise NotADirectoryError(20, "Not a directory", str(probe))
        # unique per thread too: a client's threads (a task worker's slots) probe at once
        name = probe / f".orcr-probe-{os.getpid()}-{threading.get_ident()}"
        os.close(os.open(name, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        os.unlink(name)
    except OSError as exc:
        return unwritable(path, exc)
    return None


def require_writable(path: Path) -> Path:
    """Create ``path`` if needed; raise Unwritable unless orcr can write there."""
    problem = writable_problem(path)
    if problem is None:
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            problem = unwritable(path, exc)
    if problem:
        raise Unwritable(problem)
    return path


def unwritable(path: Path, exc: OSError) -> str:
    """One line for a directory orcr cannot write: which one, why, and the fix."""
    import errno

    if exc.errno == errno.ENOTDIR:
        where = exc.filename or path
        return (
            f"orcr cannot create {path}: {where} is not a directory; point ORCR_HOME at a "
            "writable directory"
        )
    why = exc.strerror or str(exc)
    return (
        f"orcr cannot write to {path} ({why}); make it writable (chmod u+w, or remount "
        "read-write), or point ORCR_HOME at a writable directory"
    )


def ensure_private_dir(path: Path) -> Path:
    """Create ``path`` (and parents) and make it 0700: the socket is the user's alone."""
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o700)
    return path


#: path parts of folders a sync service owns: a sync client rewrites, renames and
#: conflict-copies files under a running program (a task queue, an agent's checkout)
SYNC_MARKERS = (
    ("Library/Mobile Documents", "iCloud Drive"),
    ("Library/CloudStorage", "a cloud storage provider (iCloud, Dropbox, Google Drive, OneDrive)"),
    ("iCloud Drive", "iCloud Drive"),
    ("Dropbox", "Dropbox"),
    ("Google Drive", "Google Drive"),
    ("GoogleDrive", "Google Drive"),
    ("My Drive", "Google Drive"),
    ("OneDrive", "OneDrive"),
)


def synced_by(path: str | Path) -> str | None:
    """The sync service whose folder holds ``path`` (by a folder name in it), or None."""
    text = str(Path(path).resolve()) + "/"
    return next((svc for marker, svc in SYNC_MARKERS if f"/{marker}/" in text), None)
