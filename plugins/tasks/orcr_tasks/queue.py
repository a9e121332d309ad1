"""The queue directory: a task's state is the folder its file is in.

Two kinds of move, both crash safe (a task is in exactly one state folder at
every instant, because every step is one ``rename``):

* **Claims** are bare renames, lock free: ``todo/T.md -> doing/T.md`` (a
  builder), ``review/T.md -> verifying/T.md`` (a verifier). ``rename`` is
  atomic on one filesystem, so of two claimers exactly one wins; the loser
  gets ``FileNotFoundError`` and tries the next task. A claim never edits the
  file. A file that cannot be read as a task is never claimed: it is renamed
  into ``quarantine/`` as it is (see :meth:`Queue.quarantine`).
* **Locked moves** change a file and move it (finish, park, verify, reject,
  reap, answer, release: :mod:`orcr_tasks.moves`). Under the queue lock
  (:mod:`orcr_tasks.lock`) the new text is journaled in the lock, written
  beside the file and renamed over it, then the file is renamed into its new
  folder. A locked move never starts from a folder a claim takes from (todo/,
  review/), so nothing else touches the file meanwhile. A holder killed half
  way leaves the lock and its journal; whoever clears the dead lock finishes
  the move first (:mod:`orcr_tasks.journal`).

A move to inbox/ or failed/ carries a notice (:mod:`orcr_tasks.announce`): it is
in the journal from the start and written once the rename is durable, before the
journal goes, so a holder killed anywhere after the rename leaves it to whoever
clears the lock, who writes it under the same id. The server is poked once the
lock is released.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

from orcr_core.store import faults
from orcr_tasks import announce, heartbeats, journal, settings, spent
from orcr_tasks.backend import Backend, QueueError, check_new_task
from orcr_tasks.files import fsync_dir, now_iso, rename_noreplace, write_atomic
from orcr_tasks.location import queue_segment, unsafe_location
from orcr_tasks.lock import DirLock, LockBusy, clear_dead, owner_alive, read_owner
from orcr_tasks.moves import Moves
from orcr_tasks.taskfile import Task, TaskFileError, load

STATES = ("backlog", "todo", "doing", "review", "verifying", "done", "failed", "inbox",
          "landing", "landed")  # fmt: skip
#: where files that cannot be read as tasks are moved aside, untouched (not a state)
QUARANTINE = "quarantine"
FOLDERS = (*STATES[:8], "results", "hb")  # landing/, landed/: made by init or a lander
MARKER = ".orcr-tasks"
#: where each role claims from and into
CLAIMS = {"builder": ("todo", "doing"), "verifier": ("review", "verifying"),
          "lander": ("done", "landing")}  # fmt: skip
#: the folders a claim holds a task in
HELD = ("doing", "verifying", "landing")
#: an unreadable file younger than this may still be being written: it is
#: skipped, not moved aside, until it is older
UNREADABLE_GRACE = 2.0


class Queue(Backend):
    #: how long a locked move waits for a lock whose owner is alive (or unknown)
    lock_wait = 30.0

    def __init__(self, root: str | os.PathLike[str]):
        self.root = Path(root).absolute()
        self.lock = DirLock(self.root / ".lock")
        self.noticed = False  # a notice was written under the lock: poke the server after
        self.moves = Moves(self)  # the task's life over these folders (orcr_tasks.moves)

    # -- opening ------------------------------------------------------------

    @classmethod
    def init(cls, root: str | os.PathLike[str]) -> Queue:
        path = Path(root).expanduser()
        if not path.is_absolute():
            path = Path.cwd() / path
        why = unsafe_location(path)
        if why:
            raise QueueError(
                f"refusing to create a queue here: {why}; pick a path such as ~/.queues/NAME"
            )
        if path.exists() and not path.is_dir():
            raise QueueError(f"{path} exists and is not a directory")
        if path.is_dir() and any(path.iterdir()) and not (path / MARKER).exists():
            raise QueueError(f"{path} is a directory that is not empty and not a queue")
        path.mkdir(parents=True, exist_ok=True)
        for folder in (*FOLDERS, *STATES[8:], QUARANTINE):
            (path / folder).mkdir(exist_ok=True)
        (path / MARKER).write_text("orcr task queue (docs/tasks.md)\n")
        return cls(path)

    @classmethod
    def open(cls, root: str | os.PathLike[str]) -> Queue:
        path = Path(root).expanduser()
        if not (path / MARKER).exists() or not all((path / f).is_dir() for f in FOLDERS):
            raise QueueError(
                f"{path} is not a task queue; create one with `orcr tasks init {path}`"
            )
        return cls(path)

    @property
    def name(self) -> str:
        """This queue's segment in its agents' paths (docs/tasks.md)."""
        return queue_segment(self.root)

    @property
    def label(self) -> str:
        return str(self.root)

    @property
    def spec(self) -> str:  # what opens this queue again (ORCR_TASKS_DIR)
        return str(self.root)

    @property
    def local_root(self) -> Path:
        return self.root

    def file(self, state: str, task_id: str) -> Path:
        return self.root / state / f"{task_id}.md"

    # -- reading ------------------------------------------------------------

    def ids(self, state: str) -> list[str]:
        names = []
        try:
            entries = list(os.scandir(self.root / state))
        except FileNotFoundError:
            return []  # quarantine/ of a queue made before it existed
        for entry in entries:
            if entry.name.endswith(".md") and not entry.name.startswith("."):
                names.append(entry.name[:-3])
        return sorted(names)

    def where(self, task_id: str) -> list[str]:
        return [s for s in STATES if self.file(s, task_id).exists()]

    def is_in(self, state: str, task_id: str) -> bool:
        return self.file(state, task_id).exists()

    def text(self, state: str, task_id: str) -> str:
        return self.file(state, task_id).read_text()

    def results(self, task_id: str) -> str | None:
        try:
            return (self.root / "results" / f"{task_id}.md").read_text()
        except FileNotFoundError:
            return None

    def record_usage(self, task_id: str, entry: dict) -> None:
        spent.write_file(self.root, task_id, entry)

    def spent(self, task_id: str | None = None) -> list[dict]:
        return spent.read_files(self.root, task_id)

    def read(self, state: str, task_id: str) -> Task:
        """The task in ``state``; TaskFileError when its file is not a readable task."""
        return load(self.file(state, task_id), task_id)

    def entries(self, state: str) -> list[tuple[Task | None, os.stat_result, str, str | None]]:
        """``(task or None, stat, id, why it is unreadable or None)`` for each file."""
        out = []
        for tid in self.ids(state):
            path = self.file(state, tid)
            try:
                st = os.lstat(path)
                out.append((load(path, None if state == QUARANTINE else tid), st, tid, None))
            except FileNotFoundError:
                continue  # moved meanwhile
            except (TaskFileError, OSError) as exc:
                out.append((None, st, tid, str(exc)))
        return out

    def tasks(self, state: str) -> list[tuple[Task | None, os.stat_result, str]]:
        return [(task, st, tid) for task, st, tid, _why in self.entries(state)]

    # -- the lock and locked moves ---------------------------------------------

    @contextmanager
    def locked(self, timeout: float | None = None):
        self.lock.acquire(self.lock_wait if timeout is None else timeout, on_dead=self.recover)
        try:
            yield
        finally:
            self.lock.release()
            self.poke()

    def poke(self) -> None:
        """Tell the server about the notices this queue wrote: only once the lock is
        released (a slow server must never hold the queue)."""
        if self.noticed:
            self.noticed = False
            announce.poke()

    def lock_status(self) -> dict | None:
        if not self.lock.path.exists():
            return None
        owner = read_owner(self.lock.path)
        return {"owner": owner, "alive": owner_alive(owner)}

    def stage_results(self, task_id: str, text: str) -> Path:
        """The builder's report, written and synced to a private temp file before the
        lock is taken (so the lock is held for a rename only)."""
        tmp = self.root / "results" / f".{task_id}.md.{secrets.token_hex(4)}.tmp"
        write_atomic(tmp, text)
        return tmp

    def commit_results(self, task_id: str, token: str | None, staged: Path) -> None:
        os.replace(staged, self.root / "results" / f"{task_id}.md")

    def discard_results(self, staged: Path) -> None:
        staged.unlink(missing_ok=True)

    def recover(self, lock_path: Path) -> str | None:
        """Finish the move a dead lock holder journaled (:mod:`orcr_tasks.journal`)."""
        return journal.finish(lock_path, self.file, self._claim_ends, self._notice)

    def _claim_ends(self, state: str, task_id: str) -> None:
        if state in HELD:  # the claim ends: its heartbeat goes first (see drop_heartbeat)
            self.drop_heartbeat(task_id)

    def unlock(self, force: bool = False) -> str:
        """Clear a stale lock after checking its owner is gone (finishing its move)."""
        said = clear_dead(self.lock.path, force, self.recover)
        self.poke()
        return said

    def _notice(self, notice: dict | None) -> None:
        if notice is not None:
            announce.record(notice)
            self.noticed = True

    def move(
        self,
        task_id: str,
        src: str,
        dst: str,
        edit: Callable[[Task], None] | None = None,
        notice: dict | None = None,
    ):
        """Change a task and move it from ``src`` to ``dst``, then write ``notice`` (if
        any); the caller holds the lock."""
        assert src not in ("todo", "review", "done"), "locked moves never start at claims"
        task = self.read(src, task_id)
        path = self.file(src, task_id)
        if edit is not None:
            edit(task)
        text = task.render()
        entry = {"id": task_id, "src": src, "dst": dst, "content": text, "notice": notice}
        journal.record(self.lock.path, entry)
        faults.point("tasks.move.journaled")
        write_atomic(path, text)
        faults.point("tasks.move.edited")
        entry["ctime_ns"] = path.stat().st_ctime_ns
        journal.record(self.lock.path, entry)
        self._claim_ends(src, task_id)
        os.rename(path, self.file(dst, task_id))
        faults.point("tasks.move.renamed")
        fsync_dir(self.root / dst)
        self._notice(notice)
        faults.point("tasks.move.noticed")
        journal.clear(self.lock.path)
        return task

    # -- settings (orcr_tasks.settings) ---------------------------------------------

    def settings(self) -> dict:
        return settings.merged(settings.read_file(self.root))

    def set_settings(self, changes: dict) -> dict:
        with self.locked():
            return settings.merged(settings.write_file(self.root, changes))

    # -- adding -----------------------------------------------------------------

    def new_id(self) -> str:
        n = 1 + sum(len(self.ids(s)) for s in STATES)
        while self.where(f"T{n}"):
            n += 1
        return f"T{n}"

    def add(
        self,
        text: str,
        done_when: str,
        task_id: str | None = None,
        depends_on: list[str] = (),
        cluster: str | None = None,
        provider: str | None = None,
        verifiers: int = 1,
        model: str | None = None,
    ) -> tuple[str, str]:
        """Write one task file into todo/ (or backlog/ while a dependency is not done)."""
        check_new_task(text, done_when, task_id, depends_on, verifiers, model)
        with self.locked():
            task_id = task_id if task_id is not None else self.new_id()
            if task_id in depends_on:
                raise QueueError(f"task {task_id} cannot depend on itself")
            found = self.where(task_id)
            if found:
                raise QueueError(f"task {task_id} already exists (in {found[0]}/)")
            unknown = [d for d in depends_on if not self.where(d)]
            if unknown:
                raise QueueError(f"--depends-on names no task in this queue: {', '.join(unknown)}")
            meta = {
                "id": task_id,
                "depends_on": list(depends_on),
                "done_when": done_when.strip(),
                "attempts": 0,
                "cluster": cluster,
                "provider": provider,
                "verifiers": verifiers,
                "created": now_iso(),
            }
            if model is not None:
                meta["model"] = model
            ready = all(self.moves.verified_in(d) for d in depends_on) and self.moves._landed(
                list(depends_on), self.settings()
            )
            state = "todo" if ready else "backlog"
            write_atomic(self.file(state, task_id), Task(meta, text.strip() + "\n").render())
            fsync_dir(self.root / state)
        return task_id, state

    # -- claiming ---------------------------------------------------------------

    def claim(
        self,
        role: str,
        token: str | None = None,
        info: dict | None = None,
        on_unreadable: Callable[[str, str, str], None] | None = None,
    ) -> str | None:
        """Claim the oldest claimable task for ``role`` by rename; None when none is left.

        Each candidate is read first: one that is not a readable task is never
        claimed but moved aside (``on_unreadable(id, where it went, why)``)."""
        src, dst = CLAIMS[role]
        candidates = []
        for tid in self.ids(src):
            try:
                candidates.append((self.file(src, tid).lstat().st_ctime_ns, tid))
            except FileNotFoundError:
                continue
        for _, tid in sorted(candidates):
            try:
                self.read(src, tid)
            except FileNotFoundError:
                continue  # another worker won this one
            except (TaskFileError, OSError) as exc:
                moved = self.quarantine(src, tid, str(exc))
                if moved and on_unreadable is not None:
                    on_unreadable(tid, moved, str(exc))
                continue
            try:
                os.rename(self.file(src, tid), self.file(dst, tid))
            except FileNotFoundError:
                continue  # another worker won this one
            faults.point("tasks.claim.renamed")
            self.write_heartbeat(tid, dict(info or {}, token=token, role=role))
            return tid
        return None

    def quarantine(self, state: str, task_id: str, why: str, force: bool = False) -> str | None:
        """Move a file that cannot be read as a task into quarantine/, as it is (one
        rename, never over another file there); None when it was left where it is
        (moved meanwhile, or modified in the last ``UNREADABLE_GRACE`` seconds, so
        perhaps still being written, unless ``force``)."""
        src = self.file(state, task_id)
        try:
            age = time.time() - src.lstat().st_mtime
        except FileNotFoundError:
            return None
        if age < UNREADABLE_GRACE and not force:
            return None
        (self.root / QUARANTINE).mkdir(exist_ok=True)
        for n in range(1, 1000):
            name = f"{task_id}.md" if n == 1 else f"{task_id}~{n}.md"
            try:
                rename_noreplace(src, self.root / QUARANTINE / name)
            except FileExistsError:
                continue
            except FileNotFoundError:
                return None
            if state in HELD:
                self.drop_heartbeat(task_id)
            return f"{QUARANTINE}/{name}"
        return None

    # -- heartbeats ---------------------------------------------------------------

    def hb(self, task_id: str) -> Path:
        return heartbeats.path(self.root, task_id)

    def write_heartbeat(self, task_id: str, info: dict) -> None:
        heartbeats.write(self.root, task_id, info)

    def touch(self, task_id: str, token: str | None = None) -> None:
        heartbeats.touch(self.root, task_id, token)

    def note_agent(self, task_id: str, token: str, info: dict) -> None:
        with self.locked():  # no reap, so no new claim, between the check and the write
            hb = self.read_heartbeat(task_id)
            if hb and hb.get("token") == token:
                self.write_heartbeat(task_id, dict(hb, **info))

    def read_heartbeat(self, task_id: str) -> dict | None:
        return heartbeats.read(self.root, task_id)

    def holds(self, task_id: str, state: str, token: str) -> bool:
        hb = self.read_heartbeat(task_id)
        return bool(hb and hb.get("token") == token and self.file(state, task_id).exists())

    def drop_heartbeat(self, task_id: str) -> None:
        """Remove ``hb/T``. Only ever while the task is in doing/ or verifying/ and the
        lock is held (:meth:`move` drops it just before the rename that ends the claim):
        ``hb/T`` is keyed by task, not by claim, so a drop after the task became
        claimable again would delete the next claim's fresh heartbeat (issue 40)."""
        heartbeats.drop(self.root, task_id)

    def age(self, state: str, task_id: str, now: float | None = None) -> float:
        """Seconds since the claim's last sign of life (:func:`heartbeats.age`)."""
        return heartbeats.age(self.root, task_id, self.file(state, task_id), now)


__all__ = ["Queue", "QueueError", "LockBusy", "STATES", "QUARANTINE", "write_atomic"]
