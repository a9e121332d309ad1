"""The two backends of ``orcr tasks`` and how a queue's name picks one.

A queue is named by a directory (the file backend, :class:`orcr_tasks.queue.Queue`:
a task's state is the folder its file is in) or by a ``postgresql://`` URL (the
PostgreSQL backend, :class:`orcr_tasks.pg.PgQueue`: a task's state is a column of
its row). Both implement :class:`Backend` and share the rules of a task's life
(:class:`orcr_tasks.moves.Moves`: attempts, verdicts, parking, releases, the reaper),
a part each holds as ``moves``, so every verb, the worker loop and ``status`` work the
same on either (docs/tasks.md).

A leaf of the package: both backends import it, and it imports neither
(:mod:`orcr_tasks.opener` opens the one a name picks).
"""

from __future__ import annotations

import time
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from orcr_tasks.taskfile import check_id

if TYPE_CHECKING:
    from orcr_tasks.moves import Moves

#: how a queue named by a URL is recognised (libpq's URI schemes)
URL_SCHEMES = ("postgresql://", "postgres://")


class QueueError(Exception):
    """Bad input or a queue in a state that refuses the request; the message says which."""


def is_url(spec) -> bool:
    return isinstance(spec, str) and spec.startswith(URL_SCHEMES)


def check_new_task(
    text: str,
    done_when: str,
    task_id: str | None,
    depends_on,
    verifiers: int,
    model: str | None = None,
) -> None:
    """What ``tasks add`` refuses on either backend before it takes the queue's lock:
    an empty text or --done-when, fewer than 1 verifier, an id that is not allowed, a
    --model that is empty or has white space in it."""
    if model is not None and (not model or model != "".join(model.split())):
        raise QueueError(
            f"--model {model!r}: a model name is one word with no white space "
            "(e.g. claude-sonnet-4-5); leave it out to use tasks work --model"
        )
    if not text.strip():
        raise QueueError("the task text is empty; give it after -- (or - to read stdin)")
    if not done_when.strip():
        raise QueueError("--done-when is empty: say what would fail if the change were wrong")
    if verifiers < 1:
        raise QueueError(f"--verifiers {verifiers}: a task needs at least 1 verifier")
    if task_id is not None:
        check_id(task_id)  # '' included: only a missing --id picks T<n>
    for dep in depends_on:
        check_id(dep)


class Backend:
    """What a backend provides; the task's life (:class:`orcr_tasks.moves.Moves`) is
    written against it. ``state`` is one of ``orcr_tasks.queue.STATES``."""

    #: the task's life over this backend (finish, verdicts, parking, releases, reaping)
    moves: Moves

    #: how this queue is shown to people and in events: a path, or a URL without
    #: its password
    label: str
    #: this queue's segment in its agents' paths (docs/tasks.md, "Agent paths")
    name: str
    #: the directory holding the queue, or None when it has none (a database)
    local_root = None
    #: what opens this queue again (a path, or the URL as given, password and all)
    spec: str

    # reading
    def ids(self, state: str) -> list[str]: ...
    def where(self, task_id: str) -> list[str]: ...

    def locate(self, task_id: str) -> str:
        """The state ``task_id`` is in; QueueError when it is in none."""
        check_id(task_id)
        found = self.where(task_id)
        if not found:
            raise QueueError(f"no task {task_id!r} in {self.label}")
        return found[0]

    def is_in(self, state: str, task_id: str) -> bool: ...
    def read(self, state: str, task_id: str): ...
    def text(self, state: str, task_id: str) -> str:
        """The task as its Markdown file reads (``tasks show``)."""

    def results(self, task_id: str) -> str | None:
        """The builder's report, or None."""

    def entries(self, state: str) -> list: ...
    def tasks(self, state: str) -> list:
        """``(task or None when unreadable, stat, task id)`` for each task in ``state``."""

    # what each agent spent, written by whoever ended it (orcr_tasks.spent)
    def record_usage(self, task_id: str, entry: dict) -> None: ...
    def spent(self, task_id: str | None = None) -> list[dict]:
        """The records of one task's agents, or of every task's, each with its ``task``."""

    # one change at a time: the file lock, or a transaction
    def locked(self, timeout: float | None = None) -> AbstractContextManager: ...
    def move(self, task_id: str, src: str, dst: str, edit=None): ...
    def stage_results(self, task_id: str, text: str): ...
    def commit_results(self, task_id: str, token: str | None, staged) -> None: ...
    def discard_results(self, staged) -> None: ...
    def lock_status(self) -> dict | None:
        """The queue lock's owner when it is held, for ``status``; None when free."""

    def quarantine(self, state: str, task_id: str, why: str, force: bool = False):
        """Move a file that is not a readable task aside, as it is; where it went."""

    def before_release(self) -> None:
        """Called under the lock before dependants are released (PostgreSQL serialises
        releases with adds); nothing by default."""

    def flush_notices(self) -> int:
        """Write the notices a mover killed after its move left; how many. Nothing by
        default (the folder queue's are finished by whoever clears its dead lock)."""
        return 0

    def unlock(self, force: bool = False) -> str:
        """Clear a dead holder's lock, if the backend has one; what was done."""
        raise NotImplementedError

    # the queue's settings (orcr_tasks.settings), over their defaults
    def settings(self) -> dict: ...
    def set_settings(self, changes: dict) -> dict: ...

    # claims and heartbeats
    def claim(self, role: str, token=None, info=None, on_unreadable=None) -> str | None: ...
    def write_heartbeat(self, task_id: str, info: dict) -> None: ...
    def touch(self, task_id: str, token: str | None = None) -> None:
        """Refresh the claim's heartbeat; with ``token``, only while that token holds
        the claim (a reaped worker never keeps the next claim's heartbeat fresh)."""

    def note_agent(self, task_id: str, token: str, info: dict) -> None:
        """Add ``info`` (the agent a claim started) to the claim's heartbeat, only
        while ``token`` holds the claim."""

    def read_heartbeat(self, task_id: str) -> dict | None: ...
    def holds(self, task_id: str, state: str, token: str) -> bool: ...
    def drop_heartbeat(self, task_id: str) -> None: ...
    def age(self, state: str, task_id: str, now: float | None = None) -> float: ...

    def stale_claims(self, stale: float) -> list[tuple[str, str, dict, float]]:
        """Under the lock, the claims whose heartbeat is older than ``stale`` seconds:
        ``(task id, state, heartbeat, age)``. This default looks at every claim; a
        backend that can ask for the stale ones at once overrides it (PostgreSQL)."""
        now = time.time()
        found = []
        for state in ("doing", "verifying", "landing"):
            for tid in self.ids(state):
                age = self.age(state, tid, now)
                if age > stale:
                    found.append((tid, state, self.read_heartbeat(tid) or {}, age))
        return found
