"""A claim never loses its heartbeat to another claim's cleanup (issue 40, item 1).

The file queue keys the heartbeat by task (``hb/T``), shared by the builder's and the
verifier's claims. Every move that ends a claim used to rename the task out of
doing/ or verifying/ (where a claim can take it again) and only then delete ``hb/T``:
a claim landing in between had its fresh heartbeat deleted, so its worker was told
"the claim was reaped" and the task sat in verifying/ until the stale limit. Each move
now drops the heartbeat before its rename, under the lock (docs/tasks.md, "Heartbeat
or be reaped"); a row's claim is cleared in the same UPDATE that moves it.

Each test here lands a claim at the exact instant the task becomes claimable again,
while the move that ended the previous claim has not returned yet: just after the
rename on the file queue (``tasks.move.renamed``, the lock still held), just after
the commit on PostgreSQL (``tasks.pg.committed``).
"""

from __future__ import annotations

import threading

import pytest
from orcr_testing.tasks import age_claim, is_pg

from orcr_core.store import faults


def claim_on_release(monkeypatch, q, role: str, token: str) -> list:
    """Arm a claim by ``role`` with ``token``, run the first time the move under test
    makes its task claimable; returns the list the claimed id is appended to."""
    point = "tasks.pg.committed" if is_pg(q) else "tasks.move.renamed"
    claimed: list = []
    real = faults.point

    def hook(name: str) -> None:
        real(name)
        if name == point and not claimed:
            claimed.append(q.claim(role, token, {"slot": 9}))

    monkeypatch.setattr(faults, "point", hook)
    return claimed


def built(q, tid: str = "a", verifiers: int = 1) -> None:
    q.add("t", "x", task_id=tid, verifiers=verifiers)
    assert q.claim("builder", "b1") == tid
    q.moves.finish_build(tid, "b1", "r1", "echo")


def verifying(q, tid: str = "a", verifiers: int = 1) -> None:
    built(q, tid, verifiers)
    assert q.claim("verifier", "v1") == tid


def finish_build(q):
    q.add("t", "x", task_id="a")
    assert q.claim("builder", "b1") == "a"
    return "verifier", lambda: q.moves.finish_build("a", "b1", "r1", "echo")


def return_verification(q):
    verifying(q)
    return "verifier", lambda: q.moves.return_verification("a", "v1", "could not run")


def unclaim_build(q):
    q.add("t", "x", task_id="a")
    assert q.claim("builder", "b1") == "a"
    return "builder", lambda: q.moves.unclaim("a", "b1")


def unclaim_verification(q):
    verifying(q)
    return "verifier", lambda: q.moves.unclaim("a", "v1")


def reap_build(q):
    q.add("t", "x", task_id="a")
    assert q.claim("builder", "b1", {"slot": 0}) == "a"
    q.write_heartbeat("a", {"token": "b1", "role": "builder", "slot": 0})
    age_claim(q, "a", 120)
    return "builder", lambda: q.moves.reap(stale=60)


def reap_verification(q):
    verifying(q)
    q.write_heartbeat("a", {"token": "v1", "role": "verifier"})
    age_claim(q, "a", 120)
    return "verifier", lambda: q.moves.reap(stale=60)


def reject(q):
    verifying(q)
    return "builder", lambda: q.moves.verdict("a", "v1", False, "echo", "VERDICT: reject no")


def pass_one_of_two(q):
    verifying(q, verifiers=2)
    return "verifier", lambda: q.moves.verdict("a", "v1", True, "echo", "VERDICT: pass")


def fail_build(q):
    q.add("t", "x", task_id="a")
    assert q.claim("builder", "b1") == "a"
    return "builder", lambda: q.moves.fail_build("a", "b1", "the agent failed")


MOVES = [
    finish_build,
    return_verification,
    unclaim_build,
    unclaim_verification,
    reap_build,
    reap_verification,
    reject,
    pass_one_of_two,
    fail_build,
]


@pytest.mark.parametrize("setup", MOVES, ids=[m.__name__ for m in MOVES])
def test_a_claim_landing_as_a_move_releases_the_task_keeps_its_heartbeat(q, monkeypatch, setup):
    """The issue's four moves (finish_build, return_verification, unclaim, the reap) and
    the others that end a claim into a claimable folder (a reject, a pass short of
    ``verifiers``, a failed build). Planted: the moves drop ``hb/T`` after the rename
    (as before issue 40) -> fails on the file queue for every move; on PostgreSQL, the
    row's claim cleared by a statement after the move's commit -> fails for every move."""
    role, move = setup(q)
    claimed = claim_on_release(monkeypatch, q, role, "new")
    move()
    assert claimed == ["a"], "the claim did not land in the window: the test proves nothing"
    state = "doing" if role == "builder" else "verifying"
    assert q.holds("a", state, "new"), "the new claim lost its heartbeat to the old one's move"
    assert q.read_heartbeat("a")["token"] == "new"
    q.touch("a")  # the new claim's worker can keep heartbeating ...
    assert q.moves.reap(stale=60) == []  # ... and nobody reaps it
    # and it can finish its work
    if role == "builder":
        q.moves.finish_build("a", "new", "r2", "echo")
        assert q.where("a") == ["review"]
    else:
        assert q.moves.verdict("a", "new", True, "other", "VERDICT: pass") in ("done", "review")


def test_a_reap_records_the_claim_it_ended_in_the_task_file(q):
    """A worker told its claim was reaped finds it in the task file: a reaped build's
    ``## Attempt failed`` and a reaped verification's ``## Verification reaped`` name
    the claim's token, its worker and its agent. Planted: the reap of a verification
    moves it without a section (as before) -> fails."""
    verifying(q)
    q.add("t", "x", task_id="b")
    assert q.claim("builder", "b9") == "b"
    hb = {"host": "h1", "pid": 11, "slot": 2, "agent": "tasks/q/a/verify_v1", "uuid": "u1"}
    q.write_heartbeat("a", dict(hb, token="v1", role="verifier"))
    q.write_heartbeat("b", dict(hb, token="b9", role="builder", agent="tasks/q/b/build_b9"))
    age_claim(q, "a", 120)
    age_claim(q, "b", 120)
    assert sorted(q.moves.reap(stale=60)) == [("a", "verifying", "review"), ("b", "doing", "todo")]
    a = q.read("review", "a").body
    assert "## Verification reaped" in a
    assert "claim v1 of worker h1/11 slot 2" in a and "agent tasks/q/a/verify_v1 ended" in a
    b = q.read("todo", "b")
    assert b.attempts == 1 and "## Attempt failed 1" in b.body
    assert "claim b9 of worker h1/11 slot 2" in b.body and "tasks/q/b/build_b9" in b.body


def test_two_hundred_finish_then_claim_races_lose_no_claim(q):
    """A builder finishes 200 tasks one after another while a verifier claims each the
    moment it reaches review/: every verifier's claim keeps its heartbeat. Planted:
    ``hb/T`` dropped after the rename -> fails (26 of 200 claims lost); on PostgreSQL
    the claim cleared after the move's commit -> fails (75 of 200 lost)."""
    n = 200
    for i in range(n):
        q.add("t", "x", task_id=f"t{i:03d}")
    for i in range(n):
        assert q.claim("builder", f"b{i}") == f"t{i:03d}"
    claims: dict[str, str] = {}
    lost: list[str] = []
    done = threading.Event()
    errors: list[BaseException] = []

    def verifier() -> None:
        try:
            spins = 0
            while len(claims) < n and spins < 10_000_000:
                spins += 1
                token = f"v{len(claims)}"
                tid = q.claim("verifier", token)
                if tid is None:
                    if done.is_set() and not q.ids("review"):
                        return
                    continue
                claims[tid] = token
                if not q.holds(tid, "verifying", token):
                    lost.append(tid)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    t = threading.Thread(target=verifier)
    t.start()
    try:
        for i in range(n):
            q.moves.finish_build(f"t{i:03d}", f"b{i}", "r1", "echo")
    finally:
        done.set()
        t.join(120)
    assert not errors, errors
    assert len(claims) == n, f"{n - len(claims)} tasks never claimed"
    lost += [tid for tid, token in claims.items() if not q.holds(tid, "verifying", token)]
    assert not lost, f"{len(set(lost))} of {n} claims lost their heartbeat: {sorted(set(lost))}"


def test_a_reaped_claims_worker_never_touches_or_writes_into_the_next_claim(q):
    """A worker whose build was reaped, and claimed again by another, goes on calling
    ``touch`` and ``note_agent`` with its old token: the new claim's heartbeat is left as
    it was, neither kept fresh (a dead new claimer is still reaped) nor given the old
    worker's agent; the new claim's own token refreshes it. Planted: ``touch`` ignoring
    the token (as before, on both backends) -> the aged claim looks fresh -> fails;
    ``note_agent`` as the worker's old read-modify-write of the heartbeat -> the new
    claim names the old agent -> fails."""
    q.add("t", "x", task_id="a")
    assert q.claim("builder", "old") == "a"
    q.note_agent("a", "old", {"agent": "p/old", "uuid": "u-old"})
    assert q.read_heartbeat("a")["uuid"] == "u-old"
    age_claim(q, "a", 120)
    assert [r[0] for r in q.moves.reap(stale=60)] == ["a"]
    assert q.claim("builder", "new") == "a"

    age_claim(q, "a", 120)
    q.touch("a", "old")
    q.note_agent("a", "old", {"agent": "p/old", "uuid": "u-old"})
    hb = q.read_heartbeat("a")
    assert hb["token"] == "new" and "uuid" not in hb and "agent" not in hb
    assert q.age("doing", "a") > 60, "the reaped worker's touch kept the new claim fresh"

    q.touch("a", "new")
    assert q.age("doing", "a") < 60
    q.note_agent("a", "new", {"agent": "p/new", "uuid": "u-new"})
    assert q.read_heartbeat("a")["uuid"] == "u-new"
