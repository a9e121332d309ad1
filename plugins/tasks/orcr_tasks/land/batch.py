"""Batches: ``orcr tasks land --batch K`` lands up to K tasks with one check, and
bisects on red, as merge queues do (bors, Zuul): the throughput lever when the check
is slow (docs/tasks.md, "Batches"; figures in bench/land_batch.py).

In one scratch checkout of the branch's tip, each task's verified revision is brought
on top of the ones before it (rebase or merge, as for one task), so task *i*'s commit
holds the tip and tasks 1..*i*. A task that conflicts with the tip itself goes back to
todo/ as a conflict (an attempt, as alone); one that conflicts only with an earlier
task of its batch is given back to done/ (not an attempt: whose fault it is shows once
that one landed) and tried again after it. The check runs once, on the last commit.

Green: an intent ref per task names its own commit, the branch moves to the last one
by compare-and-swap, and each task is landed with its commit. Red: the batch is split
in two, the first half tried on the tip (landing if green), then the second half on
the tip that leaves, down to single tasks, which go back with the check's output as
alone. So every task lands checked on a tree holding exactly the branch and the tasks
before it in its batch, and the branch only ever moves to a checked commit.

Crash safety is the single lander's (:mod:`orcr_tasks.land.lander`): every intent ref
is written before the compare-and-swap, so a restart finds each task's commit on the
branch (landed, not again) or not (landed afresh).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from orcr_core.store import faults
from orcr_tasks.land import git as g
from orcr_tasks.land import moves


@dataclass
class Member:
    tid: str
    token: str
    task: object
    revision: str


def land_batch(ld, claims: list[tuple[str, str]]) -> Counter:
    """Land the claimed tasks (``(task, token)`` each) with as few checks as bisection
    allows; the count of each outcome."""
    counts: Counter = Counter()
    group: list[Member] = []
    for tid, token in claims:
        try:
            ready = ld.ready(tid, token)
        except g.GitError as exc:
            counts[_give_back(ld, Member(tid, token, None, ""), str(exc))] += 1
            continue
        if isinstance(ready, str):
            counts[ready] += 1
        else:
            group.append(Member(tid, token, *ready))
    if group:
        _settle(ld, group, counts)
    return counts


def _give_back(ld, m: Member, why: str) -> str:
    moves.give_back(ld.q, m.tid, m.token, why)
    ld.say(f"{m.tid}: not landed, back to done/: {why}")
    return "returned"


def _settle(ld, group: list[Member], counts: Counter) -> None:
    """Land what of ``group`` passes the check, send back what fails it (bisecting)."""
    for _ in range(ld.max_retries):
        tip = g.commit_of(ld.repo, f"refs/heads/{ld.onto}")
        try:
            red = _try(ld, group, tip, counts)
        except g.GitError as exc:
            for m in group:
                counts[_give_back(ld, m, str(exc))] += 1
            return
        if red is None:
            ids = " ".join(m.tid for m in group)
            ld.say(f"{ids}: {ld.onto} moved while checking; again on its new tip")
            continue
        if red is True:
            return
        members, why = red
        if len(members) == 1:
            counts[ld._back(members[0].tid, members[0].token, why)] += 1
            return
        half = len(members) // 2
        ld.say(f"{' '.join(m.tid for m in members)}: red together; bisecting")
        _settle(ld, members[:half], counts)
        _settle(ld, members[half:], counts)
        return
    for m in group:
        why = f"{ld.onto} moved under every one of {ld.max_retries} tries"
        counts[_give_back(ld, m, why)] += 1


def _try(ld, group: list[Member], tip: str, counts: Counter):
    """One try of ``group`` on ``tip``: True when settled (landed, or emptied by
    conflicts), ``(members, why)`` when the check failed on them all together, None
    when the branch moved meanwhile. Members settled here (a conflict) leave ``group``."""
    for m in group:
        ld.step(m.tid, m.token, "scratch")
    scratch = g.Scratch(ld.repo, ld.q.name, tip)
    try:
        faults.point("land.scratch")
        head, applied = tip, []
        for m in list(group):
            a = scratch.apply(m.revision, head, ld.strategy, f"Land {m.tid}")
            if a.commit is not None:
                applied.append((m, a.commit))
                head = a.commit
                continue
            group.remove(m)
            files = ", ".join(a.conflicts)
            if not applied:  # with the tip itself: the task's to redo, as alone
                why = f"conflicts with {ld.onto} at {tip[:12]} ({ld.strategy}): {files}"
                counts[ld._back(m.tid, m.token, why)] += 1
            else:
                before = " ".join(x.tid for x, _ in applied)
                why = (
                    f"conflicts with {before} of its batch ({files}), not with {ld.onto} "
                    f"at {tip[:12]}: tried again once they landed"
                )
                counts[_give_back(ld, m, why)] += 1
            g.git(scratch.path, "checkout", "--quiet", "--detach", head)
        faults.point("land.applied")
        if not applied:
            return True
        members = [m for m, _ in applied]
        if ld.check:
            for m in members:
                ld.step(m.tid, m.token, "check")
            faults.point("land.check_started")
            code, tail = ld.run_check([(m.tid, m.token) for m in members], scratch.path, tip)
            faults.point("land.check_done")
            if code != 0:
                what = (
                    "it" if len(members) == 1 else "the batch " + " ".join(m.tid for m in members)
                )
                why = (
                    f"the check `{ld.check}` failed (exit {code}) on {ld.onto} at {tip[:12]} "
                    f"with {what} applied as {head[:12]}:\n\n{tail}"
                )
                return members, why
        for m, commit in applied:
            ld.step(m.tid, m.token, "update")
            g.git(ld.repo, "update-ref", g.intent_ref(ld.q.name, m.tid), commit)
        faults.point("land.intent")
        if not g.compare_and_swap(ld.repo, ld.onto, head, tip):
            for m, commit in applied:
                ref = g.intent_ref(ld.q.name, m.tid)
                g.git(ld.repo, "update-ref", "-d", ref, commit, check=False)
            return None
        faults.point("land.ref_updated")
        note = g.sync_checkout(ld.repo, ld.onto, tip, head)
        if note:
            ld.say(note)
        checked = f"checked with `{ld.check}`" if ld.check else "no check configured"
        for m, commit in applied:
            how = f"on {tip[:12]} in a batch of {len(applied)}, {checked} once"
            counts[ld._landed(m.tid, m.token, m.task, commit, how)] += 1
            group.remove(m)
        return True
    finally:
        scratch.remove()
