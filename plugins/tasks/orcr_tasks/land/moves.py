"""The moves that end a lander's claim (landing/ -> landed/, todo/, review/, inbox/,
done/), each under the queue's lock (a transaction on PostgreSQL) after checking
the lander still holds its claim, like every locked move (:mod:`orcr_tasks.moves`).
"""

from __future__ import annotations

from orcr_tasks import announce
from orcr_tasks.files import now_iso
from orcr_tasks.taskfile import Task


def mark_landed(q, tid: str, token: str | None, commit: str, onto: str, note: str) -> None:
    """landing/ -> landed/ with ``landed_commit``; dependants waiting on it are released."""

    def edit(t: Task):
        t.meta["landed_commit"] = commit
        t.meta["landed_onto"] = onto
        t.meta["landed_at"] = now_iso()
        t.append(f"Landed ({now_iso()})", note)

    with q.locked():
        q.moves._held(tid, "landing", token)
        q.move(
            tid,
            "landing",
            "landed",
            edit,
            announce.prepare(q.label, tid, "landing", "landed", note),
        )
        q.moves._release()


def send_back(q, tid: str, token: str | None, reason: str) -> str:
    """A conflict or a red check: back to todo/ with ``## Land failed N``, an attempt
    (the third sends it to failed/)."""
    with q.locked():
        q.moves._held(tid, "landing", token)
        return q.moves._fail(tid, "landing", "Land failed", reason)


def refuse(q, tid: str, token: str | None, why: str, dst: str = "review") -> str:
    """Not landable as verified: to review/ for verifiers to pass again (its passes are
    cleared), or to inbox/ when a person must act. Not an attempt."""

    def edit(t: Task):
        t.meta["passes"] = []
        t.meta["verified"] = []
        t.append(f"Land refused ({now_iso()})", why)

    with q.locked():
        q.moves._held(tid, "landing", token)
        q.move(tid, "landing", dst, edit, announce.prepare(q.label, tid, "landing", dst, why))
    return dst


def give_back(q, tid: str, token: str | None, why: str, heading: str = "Land returned") -> None:
    """Back to done/ untouched but for a note: not the task's fault, not an attempt."""
    notice = announce.prepare(q.label, tid, "landing", "done", why)
    with q.locked():
        q.moves._held(tid, "landing", token)
        q.move(tid, "landing", "done", lambda t: t.append(f"{heading} ({now_iso()})", why), notice)
