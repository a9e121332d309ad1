"""A PostgreSQL queue's URL: libpq's URI syntax plus ``queue=NAME``.

``postgresql://[USER[:PASSWORD]@]HOST[:PORT]/DB?queue=NAME`` names one queue in
one database; ``host=/path/to/socket/dir`` as a query parameter reaches a Unix
socket. Every other libpq parameter (``sslmode``, ``connect_timeout``,
``passfile`` ...) is passed on to libpq as it is.

The password is never printed: :attr:`Target.label` (what ``init``, ``status``,
the workers' prompts and events show) keeps the user, host, port, database and
queue only, and errors are scrubbed of it. Give it through libpq's own means
rather than in the URL: ``PGPASSWORD`` in the environment, or a password file
(``PGPASSFILE``, ``passfile=``, else ``~/.pgpass``), which must not be readable
by group or others (mode 0600): orcr refuses one that is.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

from orcr_tasks.backend import QueueError

#: a queue's name: the same alphabet as a task id
QUEUE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
#: query parameters shown in the label (none can carry a secret)
SHOWN = ("host", "port")


@dataclass(frozen=True)
class Target:
    conninfo: str  #: the libpq URI without ``queue`` (may hold a password: never print it)
    queue: str
    label: str  #: the URL without password nor secret-bearing parameters
    password: str | None  #: only to scrub it from error messages


def parse(url: str) -> Target:
    parts = urlsplit(url)
    if parts.scheme not in ("postgresql", "postgres"):
        raise QueueError(f"not a PostgreSQL URL (postgresql://...): {parts.scheme}://")
    params = parse_qsl(parts.query, keep_blank_values=True)
    queue = [v for k, v in params if k == "queue"]
    rest = [(k, v) for k, v in params if k != "queue"]
    password = unquote(parts.password) if parts.password else None
    password = password or next((v for k, v in rest if k == "password"), None)
    user = unquote(parts.username) if parts.username else None
    hostport = parts.hostname or ""
    if parts.port:
        hostport += f":{parts.port}"
    db = parts.path.lstrip("/")
    shown = [(k, v) for k, v in rest if k in SHOWN] + [("queue", queue[-1] if queue else "")]
    label = (
        f"postgresql://{quote(user, safe='') + '@' if user else ''}{hostport}/{db}"
        f"?{urlencode(shown, safe='/')}"
    )
    if not queue or not queue[-1]:
        raise QueueError(
            f"{label}: the URL names no queue: add ?queue=NAME (letters, digits, '_', '-', '.')"
        )
    if not QUEUE_NAME.fullmatch(queue[-1]):
        raise QueueError(
            f"queue name {queue[-1]!r} is not allowed: use 1-64 letters, digits, '_', '-' or "
            "'.', starting with a letter or digit"
        )
    if not db:
        raise QueueError(f"{label}: the URL names no database (postgresql://HOST/DB?queue=NAME)")
    check_passfile(dict(rest))
    if "connect_timeout" not in dict(rest):
        rest.append(("connect_timeout", "10"))
    conninfo = parts._replace(query=urlencode(rest, safe="/")).geturl()
    return Target(conninfo=conninfo, queue=queue[-1], label=label, password=password)


def check_passfile(params: dict) -> None:
    """A password file group or others can read is refused (libpq would skip it
    silently, and the password is exposed)."""
    given = params.get("passfile") or os.environ.get("PGPASSFILE")
    path = Path(given).expanduser() if given else Path.home() / ".pgpass"
    try:
        mode = path.stat().st_mode
    except OSError:
        if given:
            raise QueueError(f"the password file {path} cannot be read") from None
        return
    if stat.S_ISREG(mode) and mode & 0o077:
        raise QueueError(
            f"the password file {path} is readable by others (mode {stat.S_IMODE(mode):04o}): "
            f"run `chmod 600 {path}`"
        )


def scrub(text: str, target: Target) -> str:
    """``text`` (an error message) without the password, were it quoted."""
    if target.password:
        text = text.replace(target.password, "***")
    return text
