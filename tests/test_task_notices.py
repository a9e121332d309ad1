"""A task parked in inbox/ or sent to failed/ is one ``task.moved`` event, and so one
notification, exactly once per move (issue 23): with no server running at the time,
and across a SIGKILL of the mover or of the server at each step
(orcr_core/notify/notices.py, plugins/tasks/orcr_tasks/announce.py)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest
from orcr_tasks.queue import Queue

from orcr_core.kit.testing import until
from tests.test_notify import Receiver, _configure

OP = """
import sys
from orcr_tasks.queue import Queue
q, op, tid = Queue(sys.argv[1]), sys.argv[2], sys.argv[3]
if op == "park":
    q.moves.park(tid, "w", "which port?")
elif op == "fail":
    q.moves.fail_build(tid, "w", "tests fail")
elif op == "unlock":
    print(q.unlock())
"""
#: op -> where the task ends up
DST = {"park": "inbox", "fail": "failed"}


def run_op(home, q: Queue, op: str, tid: str, fault: str | None = None) -> int:
    env = dict(home.env)
    if fault:
        env["ORCR_FAULT"] = fault
    r = subprocess.run(
        [sys.executable, "-c", OP, str(q.root), op, tid], env=env, capture_output=True, text=True
    )
    assert r.returncode in (0, -signal.SIGKILL), r.stderr
    return r.returncode


def ready(q: Queue, op: str, tid: str) -> None:
    """Task ``tid`` claimed by token ``w``, one step before ``op`` moves it to DST[op]:
    for ``fail``, on its third attempt."""
    q.add("the task", "x", task_id=tid)
    if op == "fail":
        for _ in range(2):
            assert q.claim("builder", token="w") == tid
            assert q.moves.fail_build(tid, "w", "tests fail") == "todo"
    assert q.claim("builder", token="w") == tid


def moved(home, tid: str) -> list[dict]:
    return [
        e["data"] for e in home.events() if e["kind"] == "task.moved" and e["data"]["task"] == tid
    ]


def notices(home) -> list[str]:
    folder = home.path / "notices"
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def drained(home) -> bool:
    return not [n for n in notices(home) if n.endswith(".json")]


def test_moves_made_while_no_server_runs_are_notified_once_when_one_starts(orcr_home, short_tmp):
    rec = Receiver()
    try:
        _configure(orcr_home, rec.url)
        q = Queue.init(short_tmp / "q")
        for op, tid in (("park", "asks"), ("fail", "breaks")):
            ready(q, op, tid)
            assert run_op(orcr_home, q, op, tid) == 0
        assert q.where("asks") == ["inbox"] and q.where("breaks") == ["failed"]
        assert len(notices(orcr_home)) == 2  # durable, waiting for a server
        (orcr_home.path / "notices" / "junk.json").write_text("{not json")

        orcr_home.start_server()
        until(lambda: len(rec.posts) >= 2, 30, what="two task notifications")
        until(lambda: drained(orcr_home), 10, what="the notices drained")
        assert notices(orcr_home) == ["junk.json.bad"]  # set aside, kept
        assert "junk.json.bad: not JSON" in orcr_home.server_log()
        asks, breaks = moved(orcr_home, "asks"), moved(orcr_home, "breaks")
        assert len(asks) == len(breaks) == 1
        assert asks[0]["to"] == "inbox" and asks[0]["reason"] == "which port?"
        assert breaks[0]["to"] == "failed" and breaks[0]["from"] == "doing"
        time.sleep(1.0)
        assert sorted(n["task"] for n in rec.notes()) == ["asks", "breaks"]
    finally:
        rec.close()


#: every step of a locked move, and the notice written before the journal goes
POINTS = [
    "tasks.lock.acquired",
    "tasks.move.journaled",
    "tasks.move.edited",
    "tasks.move.renamed",
    "tasks.move.noticed",
]


@pytest.mark.parametrize("point", POINTS)
def test_a_mover_killed_at_each_step_notifies_once(orcr_home, short_tmp, point):
    """The mover SIGKILLs itself at ``point``; whoever clears its lock (here ``orcr
    tasks unlock``) finishes the move and its notice. With the server running all
    along: after ``tasks.move.noticed`` the server drains the notice (its timer) before
    the lock is cleared, so the notice written again by the recovery is a duplicate
    that must not become a second event."""
    orcr_home.start_server()
    for op, dst in DST.items():
        q, tid = Queue.init(short_tmp / op), op
        ready(q, op, tid)
        assert run_op(orcr_home, q, op, tid, fault=point) == -signal.SIGKILL
        assert q.lock.path.exists()
        if point == "tasks.move.noticed":
            until(lambda tid=tid: moved(orcr_home, tid) and drained(orcr_home), 20, what="drained")
        assert run_op(orcr_home, q, "unlock", tid) == 0
        if point == "tasks.lock.acquired":  # nothing was journaled: the move never began
            assert q.where(tid) == ["doing"]
            assert run_op(orcr_home, q, op, tid) == 0
        assert q.where(tid) == [dst]
        until(lambda tid=tid: moved(orcr_home, tid) and drained(orcr_home), 20, what="the notice")
        time.sleep(0.3)
        got = moved(orcr_home, tid)
        assert len(got) == 1, got
        assert got[0]["queue"] == str(q.root) and got[0]["to"] == dst


@pytest.mark.parametrize("point", ["notice_emitted", "notice_committed"])
def test_a_server_killed_while_draining_makes_one_event(orcr_home, short_tmp, point):
    """``notice_emitted``: inside the transaction, before the commit (the next server
    drains the file again); ``notice_committed``: after the commit, before the file is
    deleted (the next server finds the id kept and deletes the file without an event)."""
    orcr_home.start_server(extra_env={"ORCR_FAULT": point})
    q = Queue.init(short_tmp / "q")
    ready(q, "park", "t")
    run_op(orcr_home, q, "park", "t")  # its poke makes the server drain, and die
    orcr_home.proc.wait(timeout=30)
    assert orcr_home.proc.returncode == -signal.SIGKILL
    assert len(notices(orcr_home)) == 1
    orcr_home.start_server()
    until(lambda: drained(orcr_home), 20, what="the notice drained")
    time.sleep(0.5)
    assert len(moved(orcr_home, "t")) == 1


def test_the_queue_lock_is_released_before_the_server_is_told(orcr_home, short_tmp):
    """A server that accepts and never answers: the mover waits for it (up to the poke
    timeout) only after it released the queue lock."""
    run = orcr_home.path / "run"
    run.mkdir(mode=0o700, exist_ok=True)
    lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    lsock.bind(str(run / "orcr.sock"))
    lsock.listen(4)
    q = Queue.init(short_tmp / "q")
    ready(q, "fail", "t")
    done = threading.Event()
    t = threading.Thread(target=lambda: (q.moves.fail_build("t", "w", "tests fail"), done.set()))
    t.start()
    try:
        lsock.settimeout(20)
        conn, _ = lsock.accept()
        held = q.lock.path.exists()
        assert not done.is_set()
        conn.close()
        t.join(10)
        assert not held, "the server was poked while the queue lock was held"
        assert q.where("t") == ["failed"] and len(notices(orcr_home)) == 1
        rec = json.loads((orcr_home.path / "notices" / notices(orcr_home)[0]).read_text())
        assert rec["kind"] == "task.moved" and rec["data"]["to"] == "failed"
    finally:
        lsock.close()
        t.join(10)


def test_a_reap_that_fails_several_tasks_tells_the_server_once_after_the_lock(orcr_home, short_tmp):
    """Two stale builds on their third attempt: two notices, written under the lock,
    and one poke once it is released (a slow server used to hold the lock for up to
    2 s per failed task)."""
    run = orcr_home.path / "run"
    run.mkdir(mode=0o700, exist_ok=True)
    lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    lsock.bind(str(run / "orcr.sock"))
    lsock.listen(4)
    qs = []
    for tid in ("r1", "r2"):
        q = Queue.init(short_tmp / tid)
        ready(q, "fail", tid)
        qs.append(q)
    q = qs[0]
    # both claims in one queue: move r2's file and heartbeat over
    for sub in ("doing", "hb"):
        for f in (qs[1].root / sub).iterdir():
            f.rename(q.root / sub / f.name)
    past = time.time() - 3600
    for tid in ("r1", "r2"):
        os.utime(q.hb(tid), (past, past))
    reaped = []
    t = threading.Thread(target=lambda: reaped.extend(q.moves.reap(60)))
    t.start()
    try:
        lsock.settimeout(20)
        conn, _ = lsock.accept()
        held = q.lock.path.exists()
        conn.close()
        t.join(10)
        assert not held
        assert sorted(dst for _tid, _src, dst in reaped) == ["failed", "failed"]
        lsock.settimeout(0.5)
        with pytest.raises(TimeoutError):
            lsock.accept()  # no second poke
        recs = [
            json.loads((orcr_home.path / "notices" / n).read_text()) for n in notices(orcr_home)
        ]
        assert sorted(r["data"]["task"] for r in recs) == ["r1", "r2"]
    finally:
        lsock.close()
        t.join(10)


def test_a_poke_never_starts_a_server_nor_waits_for_one(orcr_home):
    """``poke`` is one call to the server running now (client.call_once): with none it
    says False at once and starts none; a server that holds the lock and is still
    starting (no socket yet) is not waited for; a running one answers and drains."""
    from orcr_core.notify.notices import poke
    from orcr_core.server import lockfile

    start = time.monotonic()
    assert poke() is False
    assert time.monotonic() - start < 1.0
    assert lockfile.holder() is None and not orcr_home.socket.exists()  # none started

    run = orcr_home.path / "run"
    run.mkdir(mode=0o700, exist_ok=True)
    fd = lockfile.acquire(run / "server.lock")  # "<pid>": a server starting (recovery)
    try:
        assert lockfile.holder() is not None
        start = time.monotonic()
        assert poke() is False
        assert time.monotonic() - start < 1.0, "a poke waited for a starting server"
    finally:
        os.close(fd)

    orcr_home.start_server()
    assert poke() is True
