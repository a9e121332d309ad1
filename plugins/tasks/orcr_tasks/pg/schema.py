"""The PostgreSQL queue's tables and its one-statement claim.

Every queue of a database lives in the same three tables, told apart by the
``queue`` column. A task is one row of ``orcr_tasks``; its state is a column.
``token`` and ``claim`` (the claimer's pid, host, slot and agent) are set by a
claim and cleared by the move that ends it; ``fence`` counts the claims, and
every write a claim's holder makes afterwards names it, so a zombie first
attempt cannot overwrite the second. ``hb_at`` is the heartbeat, on the
database's clock (hosts' clocks never compared). ``builder`` is the identity
(host/pid) of the worker whose claim built the task: a verifier claiming with the
same identity never gets it (a claim without one, a coordinator's script, is not
checked). ``notice`` holds the notification of a move to inbox/ or failed/
(:mod:`orcr_tasks.announce`), set in the move's transaction and cleared once it is
written to orcr's notices; one a mover killed after its commit left is written by
the next reap, under the same id. ``model`` is the task's model (``tasks add
--model``), generated from ``meta`` so the two never disagree; ``orcr tasks init``
adds it to a database made before it (the code reads ``meta``, so a worker runs on
either).

The least privileges a worker's role needs: ``SELECT, INSERT, UPDATE`` on
``orcr_tasks``, ``orcr_task_results`` and ``orcr_task_usage`` (each agent's tokens,
orcr_tasks.spent), ``SELECT`` on ``orcr_task_queues``,
``USAGE`` on the sequence ``orcr_tasks_seq_seq`` (no ``DELETE``, no DDL);
``orcr tasks init`` also needs ``CREATE`` on the schema the first time, and
``INSERT`` on ``orcr_task_queues`` (docs/tasks.md).
"""

from __future__ import annotations

STATES_SQL = (
    "'backlog','todo','doing','review','verifying','done','failed','inbox','landing','landed'"
)

DDL = [
    """CREATE TABLE IF NOT EXISTS orcr_task_queues (
        name text PRIMARY KEY,
        created timestamptz NOT NULL DEFAULT now()
    )""",
    "ALTER TABLE orcr_task_queues ADD COLUMN IF NOT EXISTS settings jsonb NOT NULL "
    "DEFAULT '{}'::jsonb",
    f"""CREATE TABLE IF NOT EXISTS orcr_tasks (
        queue text NOT NULL REFERENCES orcr_task_queues (name),
        id text NOT NULL,
        seq bigserial,
        state text NOT NULL CHECK (state IN ({STATES_SQL})),
        meta jsonb NOT NULL,
        body text NOT NULL,
        moved_at timestamptz NOT NULL DEFAULT clock_timestamp(),
        token text,
        fence bigint NOT NULL DEFAULT 0,
        claim jsonb,
        hb_at timestamptz,
        builder text,
        notice jsonb,
        PRIMARY KEY (queue, id)
    )""",
    "ALTER TABLE orcr_tasks ADD COLUMN IF NOT EXISTS notice jsonb",
    # landing/ and landed/ (tasks land): a table made before them gets the wider check
    "ALTER TABLE orcr_tasks DROP CONSTRAINT IF EXISTS orcr_tasks_state_check",
    f"ALTER TABLE orcr_tasks ADD CONSTRAINT orcr_tasks_state_check CHECK (state IN ({STATES_SQL}))",
    # the task's model (tasks add --model): kept in meta like every field, and shown as
    # a column of its own for queries; added to a database made before it by `tasks init`
    "ALTER TABLE orcr_tasks ADD COLUMN IF NOT EXISTS model text "
    "GENERATED ALWAYS AS (meta->>'model') STORED",
    "CREATE INDEX IF NOT EXISTS orcr_tasks_notices ON orcr_tasks (queue) WHERE notice IS NOT NULL",
    "CREATE INDEX IF NOT EXISTS orcr_tasks_by_state ON orcr_tasks (queue, state, moved_at, seq)",
    """CREATE TABLE IF NOT EXISTS orcr_task_results (
        queue text NOT NULL,
        id text NOT NULL,
        fence bigint NOT NULL,
        text text NOT NULL,
        written_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (queue, id)
    )""",
    """CREATE TABLE IF NOT EXISTS orcr_task_usage (
        queue text NOT NULL,
        id text NOT NULL,
        agent text NOT NULL,
        entry jsonb NOT NULL,
        written_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (queue, id, agent)
    )""",
]

#: the claim: one statement, one winner. The inner SELECT locks the oldest
#: claimable row, skipping rows another claimer holds, and the UPDATE moves it
#: and records the claim and its first heartbeat at once. The inner SELECT is a
#: scalar subquery (``id = (SELECT ...)``, run once), not ``id IN (SELECT ...)``:
#: PostgreSQL may run an IN subquery again for each row the UPDATE scans, and each
#: run locks the next row, so one claim took every task (the race tests caught it).
CLAIM = """
UPDATE orcr_tasks t
   SET state = %(dst)s, token = %(token)s, fence = t.fence + 1, claim = %(claim)s::jsonb,
       hb_at = now(), moved_at = clock_timestamp(),
       builder = CASE WHEN %(dst)s::text = 'doing' THEN %(who)s::text ELSE t.builder END
 WHERE t.queue = %(queue)s AND t.id = (
       SELECT id FROM orcr_tasks
        WHERE queue = %(queue)s AND state = %(src)s
          AND (%(src)s::text = 'todo' OR %(who)s::text IS NULL OR builder IS DISTINCT FROM %(who)s::text)
        ORDER BY moved_at, seq
        LIMIT 1
          FOR UPDATE SKIP LOCKED)
RETURNING t.id, t.fence
"""

#: the builder's report: written only by the holder of the claim (its token), and
#: only over a report of an older claim (its fence)
RESULTS = """
INSERT INTO orcr_task_results (queue, id, fence, text)
SELECT queue, id, fence, %(text)s FROM orcr_tasks
 WHERE queue = %(queue)s AND id = %(id)s AND state = 'doing' AND token = %(token)s
ON CONFLICT (queue, id) DO UPDATE
   SET fence = EXCLUDED.fence, text = EXCLUDED.text, written_at = now()
 WHERE orcr_task_results.fence <= EXCLUDED.fence
RETURNING fence
"""

#: stale claims, on the database's clock; rows a live transaction holds are skipped
STALE = """
SELECT id, state, claim, extract(epoch FROM now() - hb_at)::float8
  FROM orcr_tasks
 WHERE queue = %(queue)s AND state IN ('doing', 'verifying', 'landing')
   AND hb_at < now() - make_interval(secs => %(stale)s)
 ORDER BY id
   FOR UPDATE SKIP LOCKED
"""
