"""Test helpers for both backends: a throwaway PostgreSQL, and the few checks the
conformance suite makes that each backend answers its own way (plugins/tasks/tests,
bench/tasks_throughput.py).

:class:`PgCluster` runs a real PostgreSQL (Debian's ``postgresql`` package: ``initdb``
and ``pg_ctl``) in a temporary directory, on a Unix socket only, with no system
service. PostgreSQL refuses to run as root: as root, the cluster's directory is
given to an unprivileged user (``nobody``, or ``ORCR_PG_USER``) and ``initdb`` and
``pg_ctl`` run as that user through ``runuser`` (``su`` where there is none).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

#: the database superuser the throwaway cluster is made with (trust auth, socket only)
SUPERUSER = "orcr"
#: the reason a conformance test of the PostgreSQL backend is skipped, when it is
NOT_FOUND = "PostgreSQL not found (initdb, pg_ctl): apt-get install postgresql"


def find_bin(name: str) -> str | None:
    """``name`` on PATH, else in Debian's /usr/lib/postgresql/<version>/bin (newest)."""
    found = shutil.which(name)
    if found:
        return found
    for d in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version, reverse=True):
        if os.access(os.path.join(d, name), os.X_OK):
            return os.path.join(d, name)
    return None


def _version(path: str) -> float:
    try:
        return float(Path(path).parent.name)
    except ValueError:
        return 0.0


class PgCluster:
    """A throwaway PostgreSQL cluster on a Unix socket in ``dir``."""

    def __init__(self, base: str | None = None):
        self.initdb, self.pg_ctl = find_bin("initdb"), find_bin("pg_ctl")
        if not (self.initdb and self.pg_ctl):
            raise FileNotFoundError(NOT_FOUND)
        # a short path: a Unix socket's path is limited to 107 bytes
        self.dir = Path(tempfile.mkdtemp(prefix="orcr-pg-", dir=base or "/tmp"))
        self.data = self.dir / "data"
        self.user = None
        if os.geteuid() == 0:
            self.user = os.environ.get("ORCR_PG_USER", "nobody")
            pw = pwd.getpwnam(self.user)
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
        self._n = 0

    def _as_owner(self, argv: list[str]) -> list[str]:
        if self.user is None:
            return argv
        if shutil.which("runuser"):
            return ["runuser", "-u", self.user, "--", *argv]
        return ["su", "-s", "/bin/sh", self.user, "-c", " ".join(map(_quote, argv))]

    def start(self) -> PgCluster:
        # the cluster outlives the test that first asked for it: it must not carry that
        # test's ORCR_HOME, or the test's teardown (which kills every process under its
        # home) takes the session's PostgreSQL down with it
        env = {k: v for k, v in os.environ.items() if not k.startswith("ORCR_")}
        run = dict(capture_output=True, text=True, cwd="/", timeout=120, env=env)
        r = subprocess.run(
            self._as_owner([self.initdb, "-D", str(self.data), "-U", SUPERUSER,
                            "--auth=trust", "-E", "UTF8", "--no-sync"]),
            **run,
        )  # fmt: skip
        if r.returncode:
            raise RuntimeError(f"initdb failed: {r.stderr.strip() or r.stdout.strip()}")
        opts = (
            f"-k {self.dir} -c listen_addresses='' -c fsync=off -c synchronous_commit=off "
            "-c full_page_writes=off -c max_connections=200 -c shared_buffers=16MB"
        )
        r = subprocess.run(
            self._as_owner([self.pg_ctl, "-D", str(self.data), "-o", opts,
                            "-l", str(self.dir / "log"), "-w", "-t", "60", "start"]),
            **run,
        )  # fmt: skip
        if r.returncode:
            log = (self.dir / "log").read_text() if (self.dir / "log").exists() else ""
            raise RuntimeError(f"pg_ctl start failed: {r.stdout.strip()} {log[-800:]}")
        return self

    def stop(self) -> None:
        subprocess.run(
            self._as_owner([self.pg_ctl, "-D", str(self.data), "-m", "immediate", "stop"]),
            capture_output=True,
            cwd="/",
            timeout=60,
        )
        shutil.rmtree(self.dir, ignore_errors=True)

    def url(self, db: str = "postgres", queue: str = "q") -> str:
        return f"postgresql://{SUPERUSER}@/{db}?host={self.dir}&queue={queue}"

    def _admin(self, sql: str) -> None:
        import psycopg

        with psycopg.connect(f"postgresql://{SUPERUSER}@/postgres?host={self.dir}") as c:
            c.autocommit = True
            c.execute(sql)

    def new_database(self) -> str:
        """A fresh, empty database; its name."""
        self._n += 1
        name = f"t{os.getpid()}_{self._n}_{int(time.time() * 1000) % 100000}"
        self._admin(f"CREATE DATABASE {name}")
        return name

    def drop_database(self, name: str) -> None:
        self._admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def _quote(arg: str) -> str:
    import shlex

    return shlex.quote(arg)


# -- what the conformance suite checks, each backend its own way ------------------------


def is_pg(q) -> bool:
    return q.local_root is None


def spec(q) -> str:
    """What names the queue on a command line or in ``ORCR_TASKS_DIR``."""
    return q.label


def age_claim(q, task_id: str, seconds: float) -> None:
    """Make a claim's last sign of life ``seconds`` old."""
    if is_pg(q):
        q._run(
            "UPDATE orcr_tasks SET hb_at = now() - make_interval(secs => %s) "
            "WHERE queue = %s AND id = %s",
            [float(seconds), q.queue, task_id],
        )
        return
    past = time.time() - seconds
    os.utime(q.hb(task_id), (past, past))


def last_beat(q, task_id: str) -> float:
    """When the claim's heartbeat was last touched, in seconds since the epoch on the
    backend's own clock: the heartbeat file's mtime, or the row's ``hb_at``."""
    if is_pg(q):
        rows = q._rows(
            "SELECT extract(epoch FROM hb_at)::float8 FROM orcr_tasks "
            "WHERE queue = %s AND id = %s AND hb_at IS NOT NULL",
            [q.queue, task_id],
        )
        return float(rows[0][0]) if rows else 0.0
    try:
        return q.hb(task_id).stat().st_mtime
    except FileNotFoundError:
        return 0.0


def heartbeats(q) -> dict[str, dict]:
    """Every claim's heartbeat (task id -> what it says)."""
    out = {}
    for state in ("doing", "verifying"):
        for tid in q.ids(state):
            hb = q.read_heartbeat(tid)
            if hb is not None:
                out[tid] = hb
    if not is_pg(q):  # a heartbeat file left without its claim counts too
        for p in (q.root / "hb").iterdir():
            out.setdefault(p.name, q.read_heartbeat(p.name) or {})
    return out


def move_by_hand(q, task_id: str, src: str, dst: str) -> None:
    """What a coordinator does outside orcr: a ``mv``, or an ``UPDATE``."""
    if is_pg(q):
        q._run(
            "UPDATE orcr_tasks SET state = %s WHERE queue = %s AND id = %s AND state = %s",
            [dst, q.queue, task_id, src],
        )
        return
    os.rename(q.file(src, task_id), q.file(dst, task_id))


def states_of(q) -> dict[str, list[str]]:
    """Every task id -> the states holding it (counted from the files or rows)."""
    from orcr_tasks.queue import STATES

    seen: dict[str, list[str]] = {}
    for s in STATES:
        for tid in q.ids(s):
            seen.setdefault(tid, []).append(s)
    return seen
