"""Opening the store: version check first, then pragmas, then migrations.

An older binary must never corrupt a newer store, so the schema version is read
over a read-only connection before anything else touches the file: a newer
store is refused with ``store_version_mismatch`` and left byte-for-byte as it
was.

A store file that exists is never replaced or made over (issue 33 item 8). A
new store is made whole under a temporary name and linked into place
(:func:`_create`), so an existing store file always held orcr's tables; opening
one checks, inside the first write transaction, that they are there. SQLite
itself opens an empty file as a new database (and deletes its -wal): an empty,
cut or table-less file is refused ``store_corrupted`` instead
(:func:`orcr_core.store.health.file_problem`, checked before every connection).
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

from orcr_core.store import health, models
from orcr_core.store.models import Meta, OrcrMigration, db

#: ``synchronous = full``: every commit's WAL frames are on disk when COMMIT returns,
#: so an admission the client was told about, or an intent event written before a
#: side effect, survives a power loss (seed 002: durable state before side effects).
#: Group commit keeps admission fast: one WAL sync per batch of pipelined requests.
PRAGMAS = {"journal_mode": "wal", "foreign_keys": 1, "synchronous": "full", "cache_size": -8000}
BUSY_TIMEOUT = 10  # seconds


class StoreVersionMismatch(Exception):
    code = "store_version_mismatch"


def add_columns(database, table: str, columns: dict[str, str]) -> None:
    """Add each of ``columns`` (name -> SQL declaration) that ``table`` lacks.

    Migrations run on blank stores (whose tables ``create_tables`` made from
    today's models) and old ones alike, so adding a column must be idempotent;
    SQLite has no ``ADD COLUMN IF NOT EXISTS``, hence the ``table_info`` check."""
    have = {row[1] for row in database.execute_sql(f"PRAGMA table_info({table})")}
    for name, decl in columns.items():
        if name not in have:
            database.execute_sql(f"ALTER TABLE {table} ADD COLUMN {name} {decl}")


def _initial(database) -> None:
    # create_tables follows the current models, so a blank store gets today's
    # schema here; every later migration must therefore be idempotent
    # (IF NOT EXISTS / IF EXISTS) for blank and old stores alike.
    database.create_tables(models.MODELS)


def _status_seq_index(database) -> None:
    # the queue's hot reads: the oldest queued row, the queue in order
    database.execute_sql("CREATE INDEX IF NOT EXISTS agent_status_seq ON agent (status, queue_seq)")


def _drop_status_index(database) -> None:
    # (status, queue_seq) serves every lookup by status; one index less per write
    database.execute_sql("DROP INDEX IF EXISTS agent_status")


def _loops(database) -> None:
    # loops land (issue 11): the loop and loop_run tables gain the columns the
    # scheduler needs; a blank store already has them from 0001's create_tables
    add_columns(database, "loop", {"end_reason": "TEXT"})
    add_columns(
        database,
        "loop_run",
        {
            "created_at": "REAL",
            "fires": "INTEGER NOT NULL DEFAULT 1",
            "sup_pid": "INTEGER",
            "sup_start": "REAL",
            "stop_reason": "TEXT",
            "error": "TEXT",
        },
    )
    # the scheduler's reads: the earliest next fire, a loop's runs by status
    database.execute_sql(
        "CREATE INDEX IF NOT EXISTS loop_status_next ON loop (status, next_fire_at)"
    )
    database.execute_sql(
        "CREATE INDEX IF NOT EXISTS loop_run_loop_status ON loop_run (loop, status)"
    )
    # partial: agent events (the hot path) pay nothing for it
    database.execute_sql(
        "CREATE INDEX IF NOT EXISTS event_loop ON event (loop, seq) WHERE loop IS NOT NULL"
    )


def _pane_process(database) -> None:
    # the identity of the process orcr started in a pane (a blank store has it)
    add_columns(database, "agent", {"pane_process": "TEXT"})


def _turn_outcome(database) -> None:
    # agent wait and get say how the last turn ended (errored, with its error)
    add_columns(database, "agent", {"turn_status": "TEXT", "turn_error": "TEXT"})


def _resumes(database) -> None:
    # how many times ``agent resume`` requeued the row (a blank store has it)
    add_columns(database, "agent", {"resumes": "INTEGER"})


def _parking(database) -> None:
    # when the agent's pane was parked (None: in its workspace) and last un-parked
    # (the park clock restarts there); a blank store has both
    add_columns(database, "agent", {"parked_at": "REAL", "unparked_at": "REAL"})


def _unmanaged(database) -> None:
    # agents herdr detects in the user's other sessions (a blank store has it)
    database.create_tables([models.Unmanaged], safe=True)


def _stalled_at(database) -> None:
    # the stalled flag of a working agent (a blank store already has it)
    add_columns(database, "agent", {"stalled_at": "REAL"})


def _drift(database) -> None:
    # drift counters survive a server restart (orcr_core.store.drift)
    database.create_tables([models.Drift], safe=True)


def _blocked(database) -> None:
    # a starting agent whose TUI asks a person something first (a trust dialog)
    add_columns(database, "agent", {"blocked_reason": "TEXT", "blocked_at": "REAL"})


def _loop_run_agents_env_missed(database) -> None:
    # issue 20/23 (loops): --keep-agents, the creating shell's PATH and --env, and
    # the last missed fire with why (loop ls, top)
    add_columns(
        database,
        "loop",
        {"keep_agents": "INTEGER NOT NULL DEFAULT 0", "env": "TEXT", "last_missed": "TEXT"},
    )


def _notify_outbox(database) -> None:
    # notifications and their delivery state, per sink (orcr_core.notify); the
    # notifier's event cursor is meta 'notify_cursor'
    database.create_tables([models.Notification], safe=True)
    # notifications start with this store's next event, not its history; set here, in
    # the migration's transaction, so a server start costs no commit of its own
    database.execute_sql(
        "INSERT OR IGNORE INTO meta (key, value) "
        "SELECT 'notify_cursor', CAST(COALESCE(MAX(seq), 0) AS TEXT) FROM event"
    )


def _worktree(database) -> None:
    # an agent's own checkout and its per-run model and flags (issue 22); a blank
    # store has the columns; the partial index serves the monitor's sweep for ended
    # agents whose checkout is still to be kept or removed (workspaces/finish.py)
    add_columns(
        database,
        "agent",
        dict.fromkeys(("worktree", "worktree_state", "model", "run_args"), "TEXT"),
    )
    database.execute_sql(
        "CREATE INDEX IF NOT EXISTS agent_worktree_open ON agent (worktree_state) "
        "WHERE worktree_state IN ('requested', 'created')"
    )


def _pending_prompt(database) -> None:
    # an ``agent send`` prompt is written before it is typed, so a restart after a
    # crash resumes its delivery (issue 19: exactly once for every prompt)
    add_columns(database, "agent", {"pending_prompt": "TEXT"})


#: Ordered, named migrations. Never rename or reorder an applied one: the name
#: is its identity. The schema version is the number of migrations applied.
def _turn_usage(database) -> None:
    # tokens per turn (issue 25); a blank store has the table from create_tables
    database.create_tables([models.TurnUsage], safe=True)


def _notices(database) -> None:
    # the ids of drained notices (issue 23: a task parked or failed is one event, once)
    database.create_tables([models.Notice], safe=True)


def _resume_reported(database) -> None:
    # issue 21 item 7: the pane process herdr was told how to resume the agent for
    add_columns(database, "agent", {"resume_reported": "TEXT"})


def _rm(database) -> None:
    # issue 38: agents that finish (agent run --rm) and a per-run --gc-after
    add_columns(database, "agent", {"rm": "INTEGER DEFAULT 0", "gc_after": "REAL"})


def _past_tokens(database) -> None:
    # the launch tokens a resume replaced (a blank store has the column)
    add_columns(database, "agent", {"past_tokens": "TEXT"})


def _pane_close_index(database) -> None:
    # reconciliation's read of open pane closes (agents/closes.py); partial, so
    # every other event pays nothing for it
    database.execute_sql(
        "CREATE INDEX IF NOT EXISTS event_pane_close ON event (agent, seq) "
        "WHERE kind IN ('pane.close_requested', 'pane.close_applied')"
    )


def _agent_rev(database) -> None:
    # a row's revision, bumped by SQLite itself on every UPDATE of the row (by any
    # writer, raw SQL included): the monitor re-reads after a write only the rows whose
    # revision moved (agents/monitor.py). Not a model field, so no save ever writes it;
    # the trigger's own UPDATE does not fire it again (recursive_triggers is off)
    add_columns(database, "agent", {"rev": "INTEGER NOT NULL DEFAULT 0"})
    database.execute_sql(
        "CREATE TRIGGER IF NOT EXISTS agent_rev AFTER UPDATE ON agent FOR EACH ROW "
        "BEGIN UPDATE agent SET rev = OLD.rev + 1 WHERE id = OLD.id; END"
    )


MIGRATIONS: list[tuple[str, callable]] = [
    ("0001_initial", _initial),
    ("0002_agent_status_seq_index", _status_seq_index),
    ("0003_drop_agent_status_index", _drop_status_index),
    ("0004_loops", _loops),
    ("0005_agent_pane_process", _pane_process),
    ("0006_agent_turn_outcome", _turn_outcome),
    ("0007_agent_resumes", _resumes),
    ("0008_agent_parking", _parking),
    ("0009_unmanaged_agents", _unmanaged),
    ("0010_agent_stalled_at", _stalled_at),
    ("0011_drift_counters", _drift),
    ("0012_agent_blocked", _blocked),
    ("loops_keep_agents_env_missed", _loop_run_agents_env_missed),
    ("notify_outbox", _notify_outbox),
    ("agent_worktree", _worktree),
    ("turn_usage", _turn_usage),
    ("agent_pending_prompt", _pending_prompt),
    ("notices", _notices),
    ("agent_resume_reported", _resume_reported),
    ("agent_rm", _rm),
    ("agent_past_tokens", _past_tokens),
    ("event_pane_close_index", _pane_close_index),
    ("agent_rev", _agent_rev),
]
SCHEMA_VERSION = len(MIGRATIONS)


def read_schema_version(path: Path) -> int | None:
    """The store's schema version, read without writing (None for a new store)."""
    if not path.exists():
        return None
    conn = read_only_connection(path)
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    except sqlite3.OperationalError:
        return None
    finally:
        conn.close()
    return int(row[0]) if row else None


def read_only_connection(path: Path) -> sqlite3.Connection:
    # With no WAL file beside it, every committed byte is in the main file, so
    # immutable=1 reads it without creating -wal/-shm files: nothing is touched.
    # Never on an empty file: SQLite would delete its -wal, even read-only.
    why = health.file_problem(path)
    if why:
        raise health.StoreCorrupted(f"the store is damaged: {why}; {health.what_to_do(path)}")
    wal = path.with_name(path.name + "-wal")
    mode = "mode=ro" if wal.exists() else "immutable=1"
    return sqlite3.connect(f"file:{path}?{mode}", uri=True)


def count_live(path: Path) -> int:
    """Agents whose panes the current multiplexer holds (starting, working, idle,
    lost), read without writing; 0 when there is no store yet."""
    if not path.exists():
        return 0
    statuses = (*models.LIVE, "lost")
    conn = read_only_connection(path)
    try:
        marks = ",".join("?" * len(statuses))
        sql = f"SELECT count(*) FROM agent WHERE status IN ({marks})"
        return conn.execute(sql, statuses).fetchone()[0]
    except sqlite3.OperationalError:
        return 0  # no agent table yet
    finally:
        conn.close()


def open_store(path: Path):
    """Connect (per thread), apply pragmas, migrate once; refuse a newer store,
    and a damaged one (``store_corrupted``: never a fresh store over its remains).
    A store that does not exist yet is made first (:func:`_create`)."""
    if not os.path.lexists(path):
        _create(path)
    why = health.file_problem(path)
    if why:
        raise health.StoreCorrupted(f"the store is damaged: {why}; {health.what_to_do(path)}")
    try:
        return _open(path)
    except Exception as exc:  # peewee wraps the sqlite3 error
        why = health.corruption(exc)
        if why is None:
            raise
        raise health.StoreCorrupted(
            f"the store {path} is damaged ({why}); {health.what_to_do(path)}"
        ) from None


def _create(path: Path) -> None:
    """Make a new store whole under a temporary name, then link it into place: the
    link fails if a store appeared meanwhile (that one is kept), and a crash leaves
    only the temporary file, never a store file without its tables."""
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_dead_creations(path)
    tmp = path.with_name(f".{path.name}.new-{os.getpid()}-{time.monotonic_ns()}")
    db.init(str(tmp), pragmas=PRAGMAS, timeout=BUSY_TIMEOUT, check_same_thread=False)
    db.creating = True
    try:
        db.connect()
        migrate()
        db.close()  # the last connection: its WAL is checkpointed into the file
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # another process made it first: its store is the one
        dirfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dirfd)
        finally:
            os.close(dirfd)
    finally:
        db.creating = False
        if not db.is_closed():
            db.close()
        for leftover in (tmp, tmp.with_name(tmp.name + "-wal"), tmp.with_name(tmp.name + "-shm")):
            try:
                os.unlink(leftover)
            except FileNotFoundError:
                pass


def _remove_dead_creations(path: Path) -> None:
    """A creation killed before its link leaves ``.store.db.new-<pid>-<ns>`` (and its
    -wal/-shm): remove those whose process is gone, so crashes do not pile them up."""
    for leftover in path.parent.glob(f".{path.name}.new-*"):
        try:
            pid = int(leftover.name[len(path.name) + 6 :].split("-", 1)[0])
        except ValueError:
            continue
        if pid == os.getpid():
            continue
        try:
            os.kill(pid, 0)
            continue  # still creating (or the pid was reused: leave it)
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        try:
            os.unlink(leftover)
        except FileNotFoundError:
            pass


def _open(path: Path):
    found = read_schema_version(path)
    if found is not None and found > SCHEMA_VERSION:
        raise StoreVersionMismatch(
            f"store {path} has schema version {found}, newer than this orcr understands "
            f"({SCHEMA_VERSION}); upgrade orcr (pip install -U orcr) to use it. Nothing was changed."
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    db.init(str(path), pragmas=PRAGMAS, timeout=BUSY_TIMEOUT, check_same_thread=False)
    db.connect(reuse_if_open=True)
    migrate()
    return db


def migrate() -> list[str]:
    """Apply pending migrations, each in its own IMMEDIATE transaction."""
    applied: list[str] = []
    with db.atomic("IMMEDIATE"):
        if db.creating:
            db.create_tables([Meta, OrcrMigration])
        elif not db.table_exists(OrcrMigration._meta.table_name):
            # under the write lock: a store orcr made always has it (_create), so
            # this file was emptied or replaced; tables made now would be a fresh,
            # empty store over the remains of the real one
            path = Path(db.database)
            raise health.StoreCorrupted(
                f"the store is damaged: {path} holds no orcr tables; {health.what_to_do(path)}"
            )
    done = {m.name for m in OrcrMigration.select()}
    for name, step in MIGRATIONS:
        if name in done:
            continue
        db.pragma("foreign_keys", 0)
        try:
            with db.atomic("IMMEDIATE"):
                step(db)
                OrcrMigration.create(name=name, applied_at=time.time())
                Meta.replace(
                    key="schema_version", value=str(len(done) + len(applied) + 1)
                ).execute()
        finally:
            db.pragma("foreign_keys", 1)
        applied.append(name)
    if not applied:
        with db.atomic("IMMEDIATE"):
            Meta.insert(
                key="schema_version", value=str(SCHEMA_VERSION)
            ).on_conflict_ignore().execute()
    return applied


def close_store() -> None:
    if not db.is_closed():
        db.close()
