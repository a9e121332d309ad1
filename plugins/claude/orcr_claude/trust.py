"""Pre-seed Claude Code's folder trust for a checkout orcr made (issue 22 item 5).

Claude Code keeps the folders a person trusted in its global config file,
``projects.<absolute path>.hasTrustDialogAccepted``: ``$CLAUDE_CONFIG_DIR/.claude.json``
when a config dir is set (``[providers.claude] home`` sets it for orcr's agents),
else ``~/.claude.json``. A fresh worktree is a folder it has never seen, so it asks
again, and until it is answered the folder's hooks and agent files are skipped.

The file is shared with every running Claude Code, which rewrites it whole. So it
is changed the careful way: under a ``<file>.lock`` directory (the convention of
the lockfile library Node programs use; a lock older than :data:`STALE` is taken
over), read, changed in memory, written to a temporary file beside it, fsynced,
and renamed over it only if the file did not change since it was read (else read
again). A file that is not JSON is never overwritten.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from pathlib import Path

from orcr_core.kit.adapter_helpers import config_root

STALE = 10.0  # seconds after which another writer's lock is taken to be abandoned
LOCK_WAIT = 5.0  # seconds to wait for the lock
ATTEMPTS = 5  # reads and writes when the file keeps changing under the write


def config_file(options: dict) -> Path:
    if options.get("home") or os.environ.get("CLAUDE_CONFIG_DIR"):
        return config_root(options, "CLAUDE_CONFIG_DIR", "~/.claude") / ".claude.json"
    return Path(os.path.expanduser("~/.claude.json"))


@contextlib.contextmanager
def _locked(path: Path):
    lock = path.with_name(path.name + ".lock")
    deadline = time.monotonic() + LOCK_WAIT
    while True:
        try:
            os.mkdir(lock)
            break
        except FileExistsError:
            try:
                if time.time() - lock.stat().st_mtime > STALE:
                    os.rmdir(lock)
                    continue
            except OSError:
                continue
            if time.monotonic() > deadline:
                raise OSError(f"{lock} is held by another writer") from None
            time.sleep(0.05)
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            os.rmdir(lock)


def _stamp(path: Path):
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def trust(path: Path, folder: str) -> bool:
    """Record ``folder`` as trusted in ``path``; False when it already was."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with _locked(path):
        for _ in range(ATTEMPTS):
            before = _stamp(path)
            try:
                data = json.loads(path.read_text()) if before else {}
            except json.JSONDecodeError as exc:
                raise OSError(f"{path} is not JSON ({exc}); it was left as it is") from None
            if not isinstance(data, dict):
                raise OSError(f"{path} does not hold a JSON object; it was left as it is")
            project = data.setdefault("projects", {}).setdefault(folder, {})
            if project.get("hasTrustDialogAccepted") is True:
                return False
            project["hasTrustDialogAccepted"] = True
            fd, tmp = tempfile.mkstemp(prefix=path.name + ".", dir=path.parent)
            try:
                with os.fdopen(fd, "w") as fh:
                    json.dump(data, fh, indent=2)
                    fh.flush()
                    os.fsync(fh.fileno())
                os.chmod(tmp, path.stat().st_mode & 0o777 if before else 0o600)
                if _stamp(path) != before:
                    continue  # Claude Code wrote it meanwhile: read it again
                os.replace(tmp, path)
                return True
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
        raise OSError(f"{path} kept changing; {folder} was not recorded as trusted")
