"""A process killed in the middle of every move leaves every task in exactly one state
folder, and whoever clears its lock finishes the move exactly once. On PostgreSQL a
move is a transaction: a process killed inside it leaves the task where it was (the
transaction rolled back), killed after its commit leaves it moved; nothing to clear.

The kill is real: ``ORCR_FAULT`` makes the process SIGKILL itself at a point
(docs/internals.md), so nothing after it runs, no ``finally`` included.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from orcr_tasks.queue import STATES, Queue
from orcr_testing.tasks import age_claim, is_pg, spec

from orcr_core.kit.testing import until

OP = """
import sys
from orcr_tasks.opener import open_queue
q = open_queue(sys.argv[1])
op = sys.argv[2]
if op == "claim":
    q.claim("builder", token="c")
elif op == "finish":
    q.moves.finish_build("a", "b", "rev7", "echo")
elif op == "pass":
    q.moves.verdict("a", "v", True, "codex", "ok")
elif op == "reject":
    q.moves.verdict("a", "v", False, "codex", "VERDICT: reject no")
elif op == "reap":
    q.moves.reap(0.0)
elif op == "answer":
    q.moves.answer("a", "use 8080")
elif op == "add":
    q.add("new", "x", task_id="n")
"""


def run_op(q, op: str, fault: str | None) -> int:
    env = dict(os.environ)
    env.pop("ORCR_FAULT", None)
    if fault:
        env["ORCR_FAULT"] = fault
    return subprocess.run([sys.executable, "-c", OP, spec(q), op], env=env).returncode


def unlock(q) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "orcr_core.cli", "tasks", "unlock", spec(q)],
        capture_output=True,
        text=True,
    )


def one_state_each(q) -> dict[str, str]:
    seen: dict[str, list[str]] = {}
    for s in STATES:
        for tid in q.ids(s):
            seen.setdefault(tid, []).append(s)
    assert all(len(v) == 1 for v in seen.values()), seen
    return {tid: v[0] for tid, v in seen.items()}


def setup(q, op: str) -> None:
    """Task ``a`` where ``op`` takes it from; ``z`` a bystander; ``d`` waits on ``a``."""
    q.add("the task", "x", task_id="a")
    q.add("after a", "x", task_id="d", depends_on=["a"])
    if op == "claim":
        return
    assert q.claim("builder", token="b") == "a"
    q.add("bystander", "x", task_id="z")
    if op == "reap":
        age_claim(q, "a", 3600)
        return
    if op == "answer":
        q.moves.park("a", "b", "which port?")
        return
    if op == "finish":
        return
    q.moves.finish_build("a", "b", "rev7", "echo")
    assert q.claim("verifier", token="v") == "a"


#: op -> (where a ends up, a check of the edit having been applied once)
EXPECT = {
    "finish": ("review", lambda t: t.meta["revision"] == "rev7" and t.attempts == 0),
    "pass": ("done", lambda t: t.meta["passes"] == ["codex"] and t.sections("Pass") == 1),
    "reject": ("todo", lambda t: t.attempts == 1 and t.sections("Reject") == 1),
    "reap": ("todo", lambda t: t.attempts == 1 and t.sections("Attempt failed") == 1),
    "answer": ("todo", lambda t: t.sections("Answer") == 1 and t.attempts == 0),
}
POINTS = ["tasks.lock.acquired", "tasks.move.journaled", "tasks.move.edited", "tasks.move.renamed"]
SOURCE = {"finish": "doing", "pass": "verifying", "reject": "verifying", "reap": "doing",
          "answer": "inbox"}  # fmt: skip


@pytest.mark.parametrize("point", POINTS)
@pytest.mark.parametrize("op", sorted(EXPECT))
def test_a_crash_in_every_step_of_every_move(short_tmp, op, point):
    q = Queue.init(short_tmp / "q")
    setup(q, op)
    before = one_state_each(q)
    assert run_op(q, op, point) == -signal.SIGKILL
    states = one_state_each(q)
    assert set(states) == set(before)  # none lost, none doubled
    assert states["a"] in (SOURCE[op], EXPECT[op][0])
    assert q.lock.path.exists()  # the dead holder's lock is left behind

    r = unlock(q)
    assert r.returncode == 0, r.stderr
    states = one_state_each(q)
    if point == "tasks.lock.acquired":  # nothing was journaled: the move never began
        assert states["a"] == SOURCE[op] and "finished the move" not in r.stdout
        assert run_op(q, op, None) == 0  # so it can simply be done again
    else:
        assert states["a"] == EXPECT[op][0], r.stdout
    dst, check = EXPECT[op]
    q.moves.reap(stale=3600)  # what every worker does next: also releases backlog tasks
    states = one_state_each(q)
    assert states["a"] == dst and check(q.read(dst, "a"))
    assert states["z"] == "todo"  # untouched
    assert states["d"] == ("todo" if dst == "done" else "backlog")


#: a PostgreSQL move's steps: its transaction begun, the row changed (uncommitted), committed
PG_POINTS = ["tasks.pg.begun", "tasks.pg.moved", "tasks.pg.committed"]


@pytest.mark.parametrize("point", PG_POINTS)
@pytest.mark.parametrize("op", sorted(EXPECT))
def test_a_crash_in_every_step_of_every_move_on_postgresql(pg_url, op, point):
    from orcr_tasks.pg import PgQueue

    q = PgQueue.init(pg_url)
    setup(q, op)
    before = one_state_each(q)
    assert run_op(q, op, point) == -signal.SIGKILL
    states = one_state_each(q)
    assert set(states) == set(before)  # none lost, none doubled
    dst, check = EXPECT[op]
    committed = point == "tasks.pg.committed"
    assert states["a"] == (dst if committed else SOURCE[op])  # all or nothing
    r = unlock(q)
    assert r.returncode == 0 and "no lock" in r.stdout, r.stderr
    if not committed:  # rolled back: the move can simply be done again
        assert run_op(q, op, None) == 0
    q.moves.reap(stale=3600)
    states = one_state_each(q)
    assert states["a"] == dst and check(q.read(dst, "a"))  # applied exactly once
    assert states["z"] == "todo"
    assert states["d"] == ("todo" if dst == "done" else "backlog")


def test_a_crash_in_the_dependency_release_after_a_pass(q):
    setup(q, "pass")
    point = "tasks.pg.moved:2" if is_pg(q) else "tasks.move.edited:2"  # the second move
    assert run_op(q, "pass", point) == -signal.SIGKILL
    if is_pg(q):  # one transaction: the pass and the release together, or neither
        assert one_state_each(q)["a"] == "verifying"
        assert run_op(q, "pass", None) == 0
    assert one_state_each(q)["a"] == "done"
    q.moves.reap(stale=3600)  # the next locked operation takes the dead lock over
    assert one_state_each(q)["d"] == "todo" and q.lock_status() is None


def test_a_crash_between_a_claims_rename_and_its_heartbeat(q):
    setup(q, "claim")
    point = "tasks.pg.claimed" if is_pg(q) else "tasks.claim.renamed"
    assert run_op(q, "claim", point) == -signal.SIGKILL
    assert one_state_each(q)["a"] == "doing"
    # a file claim's heartbeat comes after the rename; a row's with the claim itself
    assert (q.read_heartbeat("a") is not None) == is_pg(q)
    assert q.moves.reap(stale=60) == []  # the claim itself is the sign of life
    until(lambda: q.age("doing", "a") > 0.05, what="the claim to age")
    assert q.moves.reap(stale=0.05) == [("a", "doing", "todo")]
    assert q.read("todo", "a").attempts == 1


def test_a_crash_while_adding(q):
    point = "tasks.pg.begun" if is_pg(q) else "tasks.lock.acquired"
    assert run_op(q, "add", point) == -signal.SIGKILL
    assert one_state_each(q) == {}
    assert run_op(q, "add", None) == 0  # takes the dead lock over
    assert one_state_each(q) == {"n": "todo"}


def test_recovery_leaves_a_task_claimed_back_since(short_tmp):
    """Reaped into todo/, killed before the journal went, claimed back into doing/ by a
    live worker: finishing the journaled move must not take it from that worker."""
    q = Queue.init(short_tmp / "q")
    setup(q, "reap")
    assert run_op(q, "reap", "tasks.move.renamed") == -signal.SIGKILL
    assert one_state_each(q)["a"] == "todo"
    assert q.claim("builder", token="other") == "z"
    assert q.claim("builder", token="live") == "a"  # claims take no lock
    r = unlock(q)
    assert r.returncode == 0 and "finished the move" not in r.stdout
    assert one_state_each(q)["a"] == "doing" and q.holds("a", "doing", "live")
