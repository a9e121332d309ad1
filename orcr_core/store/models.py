"""peewee models. The server is the single writer; see :mod:`orcr_core.store.db`.

Timestamps are float seconds since the epoch (UTC); the API renders them as
RFC 3339 strings.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager

from peewee import (
    AutoField,
    BooleanField,
    FloatField,
    IntegerField,
    SqliteDatabase,
    TextField,
)

from orcr_core.contracts import AgentStatus, ExitReason
from orcr_core.store import faults
from orcr_core.store.compiled import CompiledModel


class StoreDatabase(SqliteDatabase):
    """The store's connection.

    It counts the write transactions it commits (``BEGIN IMMEDIATE`` or
    ``EXCLUSIVE``, the only way orcr writes): ``server status`` reports the
    count, so a test or a benchmark can show an idle fleet costs no writes at
    all. And a crash test can SIGKILL the server right after any COMMIT (fault
    point ``after_commit``), before whatever the code does next, to show that
    what must be durable with a change was written inside its transaction (its
    events) or before it (launch.json)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._writes = 0
        self._writes_lock = threading.Lock()
        self._writing = threading.local()  # this thread's open transaction is a write
        self.creating = False  # a new store under its temporary name (store.db._create)

    def _connect(self):
        """Each thread's connection, only on a file that is still a store: SQLite
        opens an emptied file as a new database and deletes its -wal, the only copy
        left of what the store held (issue 33 item 8)."""
        if not self.creating and self.database not in (None, "", ":memory:"):
            from pathlib import Path

            from orcr_core.store import health

            why = health.file_problem(Path(self.database), running=True)
            if why:
                raise health.StoreCorrupted(
                    f"the store is damaged: {why}; {health.what_to_do(Path(self.database))}"
                )
        return super()._connect()

    def begin(self, lock_type=None):
        lock_type = lock_type or self._lock_type
        self._writing.on = bool(lock_type and lock_type.upper() in ("IMMEDIATE", "EXCLUSIVE"))
        return super().begin(lock_type)

    @contextmanager
    def write_or_savepoint(self, name: str):
        """A write transaction (``BEGIN IMMEDIATE``), or inside one (the listener's
        group commit of pipelined admissions) a savepoint in plain SQL: peewee names
        each savepoint with a fresh uuid and tracks it, more Python than the two
        statements. A failure rolls the savepoint back and is raised."""
        if not self.in_transaction():
            with self.atomic("IMMEDIATE"):
                yield
            return
        self.execute_sql(f"SAVEPOINT {name}")
        try:
            yield
        except BaseException:
            try:
                self.execute_sql(f"ROLLBACK TO SAVEPOINT {name}")
                self.execute_sql(f"RELEASE SAVEPOINT {name}")
            except Exception:  # SQLite ended the transaction itself (a full disk): the
                pass  # error raised below says why, and the group's commit never happens
            raise
        self.execute_sql(f"RELEASE SAVEPOINT {name}")

    def commit(self):
        super().commit()
        # counted once committed, never at BEGIN: a reader that sees the count move can
        # see what the write wrote (counted at BEGIN, the monitor could take the count
        # while the write was still open, read the old rows, and wait for a next write)
        if getattr(self._writing, "on", False):
            self._writing.on = False
            with self._writes_lock:
                self._writes += 1
        faults.point("after_commit")

    def rollback(self):
        self._writing.on = False
        return super().rollback()

    @property
    def write_transactions(self) -> int:
        return self._writes


db = StoreDatabase(None)

#: statuses whose TUI is alive: they hold a concurrency slot (RAM protection)
LIVE = (AgentStatus.STARTING.value, AgentStatus.WORKING.value, AgentStatus.IDLE.value)
#: statuses that keep a path reserved
ACTIVE = tuple(s.value for s in AgentStatus if s is not AgentStatus.ENDED)
#: the words of :class:`~orcr_core.contracts.AgentStatus` (plain strings, so a message
#: that prints the tuple reads as before)
STATUSES = tuple(s.value for s in AgentStatus)
#: the words of :class:`~orcr_core.contracts.ExitReason`
EXIT_REASONS = tuple(r.value for r in ExitReason)


class BaseModel(CompiledModel):
    class Meta:
        database = db
        legacy_table_names = False


class Meta(BaseModel):
    key = TextField(primary_key=True)
    value = TextField()


class OrcrMigration(BaseModel):
    name = TextField(primary_key=True)
    applied_at = FloatField()

    class Meta:
        table_name = "_orcr_migrations"


class Agent(BaseModel):
    id = AutoField()
    uuid = TextField(unique=True)
    path = TextField()
    name = TextField()
    provider = TextField()
    status = TextField()  # indexed with queue_seq (migration 0002)
    exit_reason = TextField(null=True)
    error = TextField(null=True)
    queue_seq = IntegerField(null=True, index=True)
    managed = BooleanField(default=True)
    cwd = TextField()
    launch_token = TextField(null=True)
    workspace_id = TextField(null=True)
    tab_id = TextField(null=True)
    pane_id = TextField(null=True)
    #: who runs in the pane (rematch.identity): herdr's terminal id, or pid@start time
    pane_process = TextField(null=True)
    #: the pane process (``pane_process``) herdr 0.9 was given the agent's resume
    #: command for (agents/native.py), ``refused:<process>`` when herdr refused it
    resume_reported = TextField(null=True)
    resumes = IntegerField(null=True)  # times ``agent resume`` requeued this row (None: never)
    #: launch tokens a resume replaced, space-separated: panes still carrying one are
    #: late panes of an earlier launch, closed by reconciliation (agents/reconcile.py)
    past_tokens = TextField(null=True)
    agent_session_source = TextField(null=True)
    agent_session_kind = TextField(null=True)
    agent_session_value = TextField(null=True)
    transcript_path = TextField(null=True)
    cancel_requested = BooleanField(default=False)
    move_state = TextField(null=True)  # parking | unparking while a move is under way
    parked_at = FloatField(null=True)  # set while the pane is in the parking area (0008)
    unparked_at = FloatField(null=True)  # the last un-park: the park clock restarts (0008)
    turn = IntegerField(default=0)
    turns_done = IntegerField(default=0)
    # how the last ended turn ended (completed, errored, interrupted) and its error
    turn_status = TextField(null=True)  # migration 0006
    turn_error = TextField(null=True)
    timeout = FloatField(null=True)
    created_at = FloatField()
    started_at = FloatField(null=True)
    last_progress_at = FloatField(null=True)
    #: a starting agent's TUI asks a person first (migration 0012): why, since when
    blocked_reason = TextField(null=True)
    blocked_at = FloatField(null=True)
    turn_started_at = FloatField(null=True)
    idle_since = FloatField(null=True)
    stalled_at = FloatField(null=True)  # a flag, not a status (agents/stall.py)
    ended_at = FloatField(null=True)
    loop_run = TextField(null=True)
    #: the agent's own checkout (migration 0013, orcr_core/workspaces): a JSON record
    #: and its state (requested, created, kept, removed); None: it runs in its cwd
    worktree = TextField(null=True)
    worktree_state = TextField(null=True)
    #: per-run provider options (0013): --model, and --arg values as a JSON list
    model = TextField(null=True)
    run_args = TextField(null=True)
    #: an ``agent send`` prompt not yet delivered (agent_pending_prompt): written with
    #: ``prompt.requested``, cleared with ``prompt.applied``; a restart resumes it
    pending_prompt = TextField(null=True)
    #: ``agent run --rm`` (migration agent_rm): end the agent (``done``) with its first
    #: turn's end, in the same commit; ``gc_after``: this agent's own timings.gc_after
    rm = BooleanField(default=False, null=True)
    gc_after = FloatField(null=True)
    # unmanaged rows are keyed by (session, terminal_id)
    session = TextField(null=True)
    terminal_id = TextField(null=True)


Agent.add_index(Agent.path, unique=True, where=(Agent.status != "ended"), name="agent_active_path")


class Unmanaged(BaseModel):
    """An agent herdr detects in one of the user's other sessions (migration 0009).

    orcr never acts on one; discovery keeps it current on each reconciliation
    pass. ``status`` is herdr's ``agent_status`` while the terminal exists, then
    ``ended`` (``ended_at`` set).
    """

    id = AutoField()
    session = TextField()
    terminal_id = TextField()
    kind = TextField()  # herdr's detected agent: claude, codex, ...
    status = TextField()
    pane_id = TextField(null=True)
    workspace_id = TextField(null=True)
    tab_id = TextField(null=True)
    cwd = TextField(null=True)
    label = TextField(null=True)
    name = TextField(null=True)
    agent_session_source = TextField(null=True)
    agent_session_kind = TextField(null=True)
    agent_session_value = TextField(null=True)
    discovered_at = FloatField()
    updated_at = FloatField()
    ended_at = FloatField(null=True)

    class Meta:
        table_name = "unmanaged_agent"
        indexes = ((("session", "terminal_id"), True),)


class Event(BaseModel):
    seq = AutoField()
    ts = FloatField()
    kind = TextField()
    agent = TextField(null=True, index=True)
    loop = TextField(null=True)
    run = TextField(null=True)
    data = TextField(default="{}")

    class Meta:
        table_name = "event"


class Loop(BaseModel):
    """A durable cron definition (seed 003); each definition has its own uuid."""

    uuid = TextField(primary_key=True)
    name = TextField()
    status = TextField()  # active | paused | ended
    cron = TextField(null=True)
    once_at = FloatField(null=True)
    tz = TextField()
    argv = TextField()  # JSON list
    cwd = TextField()
    overlap = TextField(default="queue")
    max_concurrency = IntegerField(default=1)
    timeout = FloatField(null=True)
    next_fire_at = FloatField(null=True)
    created_at = FloatField()
    ended_at = FloatField(null=True)
    end_reason = TextField(null=True)  # removed | fired | missed (migration 0004)
    # migration loops_keep_agents_env_missed
    keep_agents = BooleanField(default=False)  # a run's agents outlive its exit
    env = TextField(null=True)  # JSON: PATH of the creating shell and --env additions
    last_missed = TextField(null=True)  # JSON: the last missed fire and why


Loop.add_index(Loop.name, unique=True, where=(Loop.status != "ended"), name="loop_active_name")

#: run statuses that hold a concurrency slot, and the terminal ones
RUN_ACTIVE = ("running", "stopping")
RUN_ENDED = ("ok", "failed", "timeout", "stopped", "canceled")
RUN_STATUSES = ("pending", *RUN_ACTIVE, *RUN_ENDED)


class LoopRun(BaseModel):
    uuid = TextField(primary_key=True)
    loop = TextField(index=True)
    run_id = TextField()
    kind = TextField()  # scheduled | manual
    status = TextField()  # pending running stopping ok failed timeout stopped canceled
    due_at = FloatField()
    pid = IntegerField(null=True)
    pgid = IntegerField(null=True)
    proc_start = FloatField(null=True)
    exit_code = IntegerField(null=True)
    started_at = FloatField(null=True)
    ended_at = FloatField(null=True)
    # migration 0004
    created_at = FloatField(null=True)
    fires = IntegerField(default=1)  # scheduled fires coalesced into this run
    sup_pid = IntegerField(null=True)  # the supervisor waiting on the command
    sup_start = FloatField(null=True)
    stop_reason = TextField(null=True)  # stopped | timeout, once stopping
    error = TextField(null=True)

    class Meta:
        table_name = "loop_run"
        indexes = ((("loop", "run_id"), True),)


class Drift(BaseModel):
    """A drift counter (:mod:`orcr_core.store.drift`): its value and when it took it."""

    name = TextField(primary_key=True)
    value = IntegerField(default=0)
    at = FloatField(null=True)


class Notification(BaseModel):
    """One notification for one sink (:mod:`orcr_core.notify`): ``held`` (waiting for
    its gather window, its rate limit), ``pending`` (to send; ``due`` is the next
    attempt), ``sent``, ``digested`` (folded into a digest row), ``undeliverable``."""

    id = AutoField()
    sink = TextField()
    seq = IntegerField()  # the event's seq: the idempotency key
    rule = TextField()
    subject = TextField()  # agent path, loop name, task: what the rate limit counts
    body = TextField()  # the notification, JSON
    state = TextField(default="held")
    due = FloatField()
    attempts = IntegerField(default=0)
    created = FloatField()
    sent_at = FloatField(null=True)
    error = TextField(null=True)

    class Meta:
        table_name = "notification"
        indexes = ((("sink", "state", "due"), False), (("sink", "rule", "subject"), False))


class TurnUsage(BaseModel):
    """The tokens one ended turn spent (:mod:`orcr_core.usage`), written in the
    transaction that records the turn's end; kept when the agent's row goes (the
    agent's path and provider are copied so sums never need the agent)."""

    id = AutoField()
    agent = TextField()  # the agent's uuid
    turn = IntegerField()  # 1-based, in the agent's transcript
    path = TextField()
    provider = TextField()
    model = TextField(null=True)
    ended_at = FloatField()
    input = IntegerField(default=0)
    output = IntegerField(default=0)
    cache_read = IntegerField(default=0)
    cache_write = IntegerField(default=0)

    class Meta:
        table_name = "turn_usage"
        indexes = ((("agent", "turn"), True), (("ended_at",), False))


class Notice(BaseModel):
    """A notice drained into an event (:mod:`orcr_core.notify.notices`): its id is
    kept, so a notice written again after a crash never becomes a second event."""

    id = TextField(primary_key=True)
    kind = TextField()
    seq = IntegerField()  # the event it became
    at = FloatField()

    class Meta:
        table_name = "notice"


MODELS = [
    *(Meta, OrcrMigration, Agent, Event, Loop, LoopRun, Unmanaged, Drift, Notification),
    *(TurnUsage, Notice),
]
