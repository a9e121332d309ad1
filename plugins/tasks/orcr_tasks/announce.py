"""Tell orcr that a task moved to inbox/ or failed/, or out of landing/: a
``task.moved`` event, which the notification rules ``task_parked``, ``task_landed`` and
``land_failed`` read (docs/notifications.md).

Durable, once per move, whichever backend moved the task: the move is reported
with a notice (:mod:`orcr_core.notify.notices`), a file in orcr's data directory
written and fsync'd once the move is durable and before the mover lets go of it,
and the server turns each notice into one event (at start, when poked, on a
timer). A backend must make a crash between its move and the notice lead to the
notice being written by whoever finishes the move, under the same id (the file
queue keeps the notice in its lock's journal, :meth:`Queue.recover`); the same id
written twice is one event. The poke comes after the queue's lock is released:
best effort, it never starts a server and a slow one costs the mover at most
``notices.POKE_TIMEOUT`` without holding the queue.
"""

from __future__ import annotations

from orcr_core.notify import notices

#: the moves worth a notification: to these, and every move out of landing/ (a land
#: that succeeded, rule ``task_landed``, or did not, ``land_failed``)
NOTIFIED = ("inbox", "failed")


def prepare(root, task_id: str, src: str, dst: str, reason: str | None) -> dict | None:
    """The notice for a move to ``dst`` (None when ``dst`` is not worth one): give it
    to the move, which writes it (:func:`record`) once the move is durable."""
    if dst not in NOTIFIED and src != "landing":
        return None
    data = {"queue": str(root), "task": task_id, "from": src, "to": dst}
    if reason:
        data["reason"] = reason
    return notices.new("task.moved", data)


def record(notice: dict) -> None:
    notices.write(notice)


def poke() -> bool:
    return notices.poke()
