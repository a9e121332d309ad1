"""The PostgreSQL backend: a task's state is a column of its row.

The same rules as the file queue (:mod:`orcr_tasks.queue`), mapped one to one:

* a **claim** is one statement (:data:`orcr_tasks.pg.schema.CLAIM`, ``UPDATE ...
  WHERE id IN (SELECT ... FOR UPDATE SKIP LOCKED LIMIT 1) RETURNING``): of any
  number of claimers on any number of hosts exactly one wins a row, and the
  claim records its token, its claimer and its first heartbeat in that one
  statement;
* a **locked move** is a transaction (:meth:`PgQueue.locked`) holding the task's
  row (``SELECT ... FOR UPDATE``) after the holder's token is checked: a process
  killed half way leaves no trace, as PostgreSQL rolls its transaction back,
  so there is no lock to clear and no journal to finish;
* dependencies are released under a per-queue advisory lock, taken after the
  dependency's own row changed, so two dependencies passing at once cannot
  both miss the release.
"""

from __future__ import annotations

import hashlib
import json
import socket
import threading
from contextlib import contextmanager
from types import SimpleNamespace

from orcr_core.store import faults
from orcr_tasks import announce, settings
from orcr_tasks.backend import Backend, QueueError, check_new_task
from orcr_tasks.files import now_iso
from orcr_tasks.location import readable
from orcr_tasks.moves import Moves
from orcr_tasks.pg import schema
from orcr_tasks.pg.url import parse, scrub
from orcr_tasks.queue import CLAIMS, STATES
from orcr_tasks.taskfile import Task

# the same states and claims as the file queue's folders
DRIVER_HINT = "the PostgreSQL backend needs the psycopg driver: pip install 'orcr[postgresql]'"


def _database(conninfo: str):
    try:
        import psycopg  # noqa: F401
    except ImportError:
        raise QueueError(DRIVER_HINT) from None
    from peewee import PostgresqlDatabase

    from orcr_core.store.lean import arm_psycopg

    arm_psycopg()  # peewee may have been imported without it (a server: store/lean.py)
    return PostgresqlDatabase(conninfo, prefer_psycopg3=True, autoconnect=True)


class PgQueue(Backend):
    lock_wait = 30.0  # read by the worker; rows are locked for one short transaction
    local_root = None

    def __init__(self, url: str):
        self.target = parse(url)
        self.spec = url  # what opens it again (the claim guard's): may carry a password
        self.queue = self.target.queue
        self.label = self.target.label
        self.db = _database(self.target.conninfo)
        self._noticed: dict[int, bool] = {}  # thread -> a move of it carried a notice
        self.moves = Moves(self)  # the task's life over these rows (orcr_tasks.moves)

    # -- talking to the database ---------------------------------------------

    def _run(self, sql: str, params=None):
        import peewee

        try:
            return self.db.execute_sql(sql, params)
        except peewee.IntegrityError as exc:
            if "orcr_tasks_state_check" not in str(exc):
                raise
            raise QueueError(  # a table made before a state this orcr moves tasks into
                f"the PostgreSQL queue {self.label} has tables older than this orcr (no "
                f"landing/ or landed/ state): run `orcr tasks init {self.label}` once, with "
                "a role that may ALTER its tables, to bring them up to date"
            ) from None
        except (peewee.OperationalError, peewee.InterfaceError) as exc:
            raise QueueError(
                f"the PostgreSQL queue {self.label}: "
                + " ".join(scrub(str(exc).strip(), self.target).split())  # one line
            ) from None

    def _rows(self, sql: str, params=None) -> list[tuple]:
        return list(self._run(sql, params).fetchall())

    def _p(self, **kw) -> dict:
        return dict(kw, queue=self.queue)

    # -- opening ---------------------------------------------------------------

    @classmethod
    def init(cls, url: str) -> PgQueue:
        q = cls(url)
        q._run("SELECT 1")  # connect here, so a server out of reach is a QueueError
        with q.db.atomic():
            q._run("SELECT pg_advisory_xact_lock(hashtext('orcr_tasks:schema'))")
            for ddl in schema.DDL:
                q._run(ddl)
            q._run(
                "INSERT INTO orcr_task_queues (name) VALUES (%s) ON CONFLICT DO NOTHING",
                [q.queue],
            )
        return q

    @classmethod
    def open(cls, url: str) -> PgQueue:
        q = cls(url)
        found = q._rows("SELECT to_regclass('orcr_task_queues') IS NOT NULL")[0][0] and q._rows(
            "SELECT 1 FROM orcr_task_queues WHERE name = %s", [q.queue]
        )
        if not found:
            raise QueueError(
                f"{q.label} is not a task queue; create one with `orcr tasks init {q.label}`"
            )
        return q

    @property
    def name(self) -> str:
        """This queue's segment in its agents' paths: its name and a hash of its label."""
        digest = hashlib.sha256(self.label.encode()).hexdigest()[:8]
        return f"{readable(self.queue, 55) or 'q'}_{digest}"

    # -- reading ------------------------------------------------------------------

    def ids(self, state: str) -> list[str]:
        return [r[0] for r in self._rows(
            "SELECT id FROM orcr_tasks WHERE queue = %(queue)s AND state = %(state)s ORDER BY id",
            self._p(state=state),
        )]  # fmt: skip

    def where(self, task_id: str) -> list[str]:
        rows = self._rows(
            "SELECT state FROM orcr_tasks WHERE queue = %(queue)s AND id = %(id)s",
            self._p(id=task_id),
        )
        return [r[0] for r in rows]

    def is_in(self, state: str, task_id: str) -> bool:
        return self.where(task_id) == [state]

    def read(self, state: str, task_id: str) -> Task:
        rows = self._rows(
            "SELECT meta, body FROM orcr_tasks WHERE queue = %(queue)s AND id = %(id)s "
            "AND state = %(state)s",
            self._p(id=task_id, state=state),
        )
        if not rows:
            raise FileNotFoundError(f"no task {task_id} in {state}/ of {self.label}")
        return Task(dict(rows[0][0]), rows[0][1])

    def text(self, state: str, task_id: str) -> str:
        return self.read(state, task_id).render()

    def results(self, task_id: str) -> str | None:
        rows = self._rows(
            "SELECT text FROM orcr_task_results WHERE queue = %(queue)s AND id = %(id)s",
            self._p(id=task_id),
        )
        return rows[0][0] if rows else None

    def record_usage(self, task_id: str, entry: dict) -> None:
        self._run(
            "INSERT INTO orcr_task_usage (queue, id, agent, entry) "
            "VALUES (%(queue)s, %(id)s, %(agent)s, %(entry)s::jsonb) "
            "ON CONFLICT (queue, id, agent) DO UPDATE SET entry = EXCLUDED.entry, "
            "written_at = now()",
            self._p(id=task_id, agent=entry["path"], entry=json.dumps(entry)),
        )

    def spent(self, task_id: str | None = None) -> list[dict]:
        if not self._rows("SELECT to_regclass('orcr_task_usage') IS NOT NULL")[0][0]:
            return []  # a database made before it: `orcr tasks init` adds it
        rows = self._rows(
            "SELECT id, entry FROM orcr_task_usage WHERE queue = %(queue)s "
            "AND (%(id)s::text IS NULL OR id = %(id)s) ORDER BY id, agent",
            self._p(id=task_id),
        )
        return [dict(e, task=tid) for tid, e in rows]

    def entries(self, state: str) -> list[tuple]:
        """``(task, stat-like, id, None)``: a row is always a readable task, and its
        ``st_ctime`` is when it entered its state."""
        if state not in STATES:
            return []  # quarantine/: rows are never unreadable
        rows = self._rows(
            "SELECT id, meta, body, extract(epoch FROM moved_at)::float8 FROM orcr_tasks "
            "WHERE queue = %(queue)s AND state = %(state)s ORDER BY id",
            self._p(state=state),
        )
        return [(Task(dict(m), b), SimpleNamespace(st_ctime=t), i, None) for i, m, b, t in rows]

    def tasks(self, state: str) -> list[tuple]:
        return [(task, st, tid) for task, st, tid, _why in self.entries(state)]

    # -- transactions in place of the lock -------------------------------------------

    @contextmanager
    def locked(self, timeout: float | None = None):
        with self.db.atomic():
            faults.point("tasks.pg.begun")
            yield
        faults.point("tasks.pg.committed")
        if self._noticed.pop(threading.get_ident(), False):
            self.flush_notices()

    def flush_notices(self) -> int:
        """Write the notices of committed moves (this process's, or a dead mover's) to
        orcr's notices, each under its own id, then clear them; poke the server."""
        written = 0
        with self.db.atomic():
            rows = self._rows(
                "SELECT id, notice FROM orcr_tasks WHERE queue = %(queue)s "
                "AND notice IS NOT NULL FOR UPDATE SKIP LOCKED",
                self._p(),
            )
            for tid, notice in rows:
                from orcr_core.notify.notices import notices_dir

                announce.record(dict(notice, dir=str(notices_dir())))  # this host's data dir
                self._run(
                    "UPDATE orcr_tasks SET notice = NULL WHERE queue = %(queue)s AND id = %(id)s",
                    self._p(id=tid),
                )
                written += 1
        if written:
            announce.poke()
        return written

    def lock_status(self) -> None:
        return None  # no lock: a dead holder's transaction is rolled back by PostgreSQL

    def quarantine(self, state: str, task_id: str, why: str, force: bool = False) -> None:
        return None  # a row is always a readable task

    def move(self, task_id: str, src: str, dst: str, edit=None, notice=None) -> Task:
        """Change a task and move it from ``src`` to ``dst`` (ending its claim), with its
        ``notice`` (written once committed: :meth:`flush_notices`); the caller is in
        :meth:`locked`."""
        rows = self._rows(
            "SELECT meta, body, fence FROM orcr_tasks WHERE queue = %(queue)s AND id = %(id)s "
            "AND state = %(src)s FOR UPDATE",
            self._p(id=task_id, src=src),
        )
        if not rows:
            raise QueueError(f"task {task_id} is not in {src}/ any more")
        task = Task(dict(rows[0][0]), rows[0][1])
        if edit is not None:
            edit(task)
        self._run(
            "UPDATE orcr_tasks SET state = %(dst)s, meta = %(meta)s::jsonb, body = %(body)s, "
            "moved_at = clock_timestamp(), token = NULL, claim = NULL, hb_at = NULL, "
            "notice = coalesce(%(notice)s::jsonb, notice) "
            "WHERE queue = %(queue)s AND id = %(id)s AND fence = %(fence)s",
            self._p(id=task_id, dst=dst, meta=json.dumps(task.meta), body=task.body,
                    fence=rows[0][2], notice=json.dumps(notice) if notice else None),
        )  # fmt: skip
        if notice:
            self._noticed[threading.get_ident()] = True
        faults.point("tasks.pg.moved")
        return task

    def stage_results(self, task_id: str, text: str) -> str:
        return text

    def commit_results(self, task_id: str, token: str | None, staged: str) -> None:
        if token is None:  # a coordinator's script finishing a task by hand
            token = (self.read_heartbeat(task_id) or {}).get("token")
        rows = self._rows(schema.RESULTS, self._p(id=task_id, token=token, text=staged))
        if not rows:
            raise QueueError(f"task {task_id} is no longer claimed by this worker (reaped?)")

    def discard_results(self, staged) -> None:
        pass

    # -- settings (orcr_tasks.settings) ----------------------------------------------

    def _stored_settings(self) -> dict | None:
        """The queue row's ``settings``; None when the column is missing (tables made by
        an orcr before it: ``to_jsonb`` of the row reads either kind)."""
        rows = self._rows(
            "SELECT to_jsonb(q) -> 'settings' FROM orcr_task_queues q WHERE name = %s",
            [self.queue],
        )
        return dict(rows[0][0]) if rows and rows[0][0] is not None else None

    def settings(self) -> dict:
        return settings.merged(self._stored_settings())

    def set_settings(self, changes: dict) -> dict:
        with self.locked():
            if self._stored_settings() is None:
                raise QueueError(
                    f"{self.label}: its tables have no settings column yet; run `orcr tasks "
                    "init` on it once as the tables' owner"
                )
            self._run(
                "UPDATE orcr_task_queues SET settings = settings || %s::jsonb WHERE name = %s",
                [json.dumps(changes), self.queue],
            )
        return self.settings()

    # -- adding -------------------------------------------------------------------------

    def _serialise(self) -> None:
        """Adds and releases of one queue, one at a time (a transaction-long lock)."""
        self._run("SELECT pg_advisory_xact_lock(hashtext('orcr_tasks:' || %s))", [self.queue])

    def add(
        self, text: str, done_when: str, task_id: str | None = None, depends_on=(),
        cluster: str | None = None, provider: str | None = None, verifiers: int = 1,
        model: str | None = None,
    ) -> tuple[str, str]:  # fmt: skip
        check_new_task(text, done_when, task_id, depends_on, verifiers, model)
        with self.locked():
            self._serialise()
            if task_id is None:
                n = (
                    1
                    + self._rows("SELECT count(*) FROM orcr_tasks WHERE queue = %s", [self.queue])[
                        0
                    ][0]
                )
                while self.where(f"T{n}"):
                    n += 1
                task_id = f"T{n}"
            if task_id in depends_on:
                raise QueueError(f"task {task_id} cannot depend on itself")
            found = self.where(task_id)
            if found:
                raise QueueError(f"task {task_id} already exists (in {found[0]}/)")
            states = {d: self.where(d) for d in depends_on}
            unknown = [d for d, s in states.items() if not s]
            if unknown:
                raise QueueError(f"--depends-on names no task in this queue: {', '.join(unknown)}")
            meta = {
                "id": task_id, "depends_on": list(depends_on), "done_when": done_when.strip(),
                "attempts": 0, "cluster": cluster, "provider": provider,
                "verifiers": verifiers, "created": now_iso(), "model": model,
            }  # fmt: skip
            meta = {k: v for k, v in meta.items() if v is not None}
            ready = all(self.moves.verified_in(d) for d in depends_on)
            state = (
                "todo"
                if ready and self.moves._landed(list(depends_on), self.settings())
                else "backlog"
            )
            self._run(
                "INSERT INTO orcr_tasks (queue, id, state, meta, body) "
                "VALUES (%(queue)s, %(id)s, %(state)s, %(meta)s::jsonb, %(body)s)",
                self._p(id=task_id, state=state, meta=json.dumps(meta), body=text.strip() + "\n"),
            )
        return task_id, state

    def before_release(self) -> None:
        self._serialise()  # releases and adds, one at a time

    # -- claiming and heartbeats --------------------------------------------------------------

    def claim(self, role: str, token=None, info=None, on_unreadable=None) -> str | None:
        """Claim the oldest claimable task for ``role`` in one statement; None when none
        is left. A verifier never claims a task a worker of its own identity built."""
        src, dst = CLAIMS[role]
        info = dict(info or {})
        who = f"{info.get('host') or socket.gethostname()}/{info['pid']}" if "pid" in info else None
        who = None if role == "lander" else who  # a verifier's rule: not its own builds
        claim = dict(info, token=token, role=role, at=now_iso())
        rows = self._rows(
            schema.CLAIM,
            self._p(src=src, dst=dst, token=token, claim=json.dumps(claim), who=who),
        )
        if not rows:
            return None
        faults.point("tasks.pg.claimed")
        return rows[0][0]

    def write_heartbeat(self, task_id: str, info: dict) -> None:
        self._run(
            "UPDATE orcr_tasks SET claim = coalesce(claim, '{}'::jsonb) || %(info)s::jsonb, "
            "hb_at = now() WHERE queue = %(queue)s AND id = %(id)s "
            "AND state IN ('doing', 'verifying', 'landing') "
            "AND token IS NOT DISTINCT FROM %(token)s",
            self._p(id=task_id, info=json.dumps(info), token=info.get("token")),
        )

    def touch(self, task_id: str, token: str | None = None) -> None:
        held = "" if token is None else " AND token = %(token)s"
        self._run(
            "UPDATE orcr_tasks SET hb_at = now() WHERE queue = %(queue)s AND id = %(id)s "
            "AND state IN ('doing', 'verifying', 'landing')" + held,
            self._p(id=task_id, token=token),
        )

    def note_agent(self, task_id: str, token: str, info: dict) -> None:
        self.write_heartbeat(task_id, dict(info, token=token))  # merged only under token

    def read_heartbeat(self, task_id: str) -> dict | None:
        rows = self._rows(
            "SELECT claim FROM orcr_tasks WHERE queue = %(queue)s AND id = %(id)s "
            "AND state IN ('doing', 'verifying', 'landing')",
            self._p(id=task_id),
        )
        return dict(rows[0][0]) if rows and rows[0][0] is not None else None

    def holds(self, task_id: str, state: str, token: str) -> bool:
        """Whether ``token`` holds the claim; in a transaction, the row stays held."""
        rows = self._rows(
            "SELECT 1 FROM orcr_tasks WHERE queue = %(queue)s AND id = %(id)s "
            "AND state = %(state)s AND token = %(token)s FOR UPDATE",
            self._p(id=task_id, state=state, token=token),
        )
        return bool(rows)

    def drop_heartbeat(self, task_id: str) -> None:
        pass  # the move that ended the claim cleared it

    def age(self, state: str, task_id: str, now: float | None = None) -> float:
        """Seconds since the last heartbeat, on the database's clock."""
        rows = self._rows(
            "SELECT extract(epoch FROM now() - hb_at)::float8 FROM orcr_tasks "
            "WHERE queue = %(queue)s AND id = %(id)s AND state = %(state)s",
            self._p(id=task_id, state=state),
        )
        return float(rows[0][0]) if rows and rows[0][0] is not None else 0.0

    def stale_claims(self, stale: float) -> list[tuple[str, str, dict, float]]:
        """One query; claims a live transaction holds are skipped (SKIP LOCKED)."""
        rows = self._rows(schema.STALE, self._p(stale=float(stale)))
        return [(tid, state, dict(hb or {}), age) for tid, state, hb, age in rows]

    def unlock(self, force: bool = False) -> str:
        self.flush_notices()
        return (
            "a PostgreSQL queue has no lock to clear: a move is a transaction, rolled back "
            "by PostgreSQL when its process dies"
        )
