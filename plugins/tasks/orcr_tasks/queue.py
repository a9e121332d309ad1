"""The queue directory: a task's state is the folder its file is in.

Two kinds of move, both crash safe (a task is in exactly one state folder at
every instant, because every step is one ``rename``):

* **Claims** are bare renames, lock free: ``todo/T.md -> doing/T.md`` (a
  builder), ``review/T.md -> verifying/T.md`` (a verifier). ``rename`` is
  atomic on one filesystem, so of two claimers exactly one wins; the loser
  gets ``FileNotFoundError`` and tries the next task. A claim never edits the
  file.
* **Locked moves** change a file and move it (finish, park, verify, reject,
  reap, answer, release). Under the queue lock (:mod:`orcr_tasks.lock`) the
  new text is journaled in the lock, written beside the file and renamed over
  it, then the file is renamed into its new folder. A locked move never
  starts from a folder a claim takes from (todo/, review/), so nothing else
  touches the file meanwhile. A holder killed half way leaves the lock and its
  journal; whoever clears the dead lock finishes the move first.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import time
from collections.abc import Callable
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from orcr_core import faults
from orcr_tasks import announce
from orcr_tasks.lock import DirLock, LockBusy, owner_alive, read_owner
from orcr_tasks.taskfile import Task, TaskFileError, check_id, parse

STATES = ("backlog", "todo", "doing", "review", "verifying", "done", "failed", "inbox")
FOLDERS = (*STATES, "results", "hb")
MARKER = ".orcr-tasks"
MAX_ATTEMPTS = 3
#: where each role claims from and into
CLAIMS = {"builder": ("todo", "doing"), "verifier": ("review", "verifying")}

SYNC_MARKERS = (
    ("Library/Mobile Documents", "iCloud Drive"),
    ("Library/CloudStorage", "a cloud storage provider (iCloud, Dropbox, Google Drive, OneDrive)"),
    ("iCloud Drive", "iCloud Drive"),
    ("Dropbox", "Dropbox"),
    ("Google Drive", "Google Drive"),
    ("GoogleDrive", "Google Drive"),
    ("My Drive", "Google Drive"),
    ("OneDrive", "OneDrive"),
)


class QueueError(Exception):
    """Bad input or a queue in a state that refuses the request; the message says which."""


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, text: str) -> None:
    """Write ``path`` whole or not at all: a private temp file, fsync, rename."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(3)}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def unsafe_location(path: Path) -> str | None:
    """Why ``path`` must not hold a queue, or None."""
    path = path.resolve()
    for parent in (path, *path.parents):
        if (parent / ".git").exists():
            return (
                f"{path} is inside the git worktree {parent}: each worktree has its own copy "
                "of repo files, so a queue there splits into copies"
            )
        if (parent / ".jj").exists():
            return f"{path} is inside the jj workspace {parent}: a queue there splits into copies"
        if (parent / ".obsidian").is_dir():
            return (
                f"{path} is inside the Obsidian vault {parent}: Obsidian Sync breaks atomic "
                "renames and creates conflict copies"
            )
        if (parent / ".dropbox").exists() or (parent / ".dropbox.cache").exists():
            return f"{path} is inside the Dropbox folder {parent}: sync breaks atomic renames"
    text = str(path)
    for marker, service in SYNC_MARKERS:
        if f"/{marker}/" in text + "/":
            return (
                f"{path} is inside a folder synced by {service}: sync services break atomic "
                "renames and create conflict copies"
            )
    return None


def agent_segment(name: str) -> str:
    """A name as one orcr path segment (``[a-z0-9_]``, at most 64 characters)."""
    seg = re.sub(r"[^a-z0-9_]", "_", name.lower()).strip("_") or "q"
    return seg[:64]


class Queue:
    def __init__(self, root: str | os.PathLike[str]):
        self.root = Path(root).absolute()
        self.lock = DirLock(self.root / ".lock")

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
        for folder in FOLDERS:
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
        return agent_segment(self.root.name)

    def file(self, state: str, task_id: str) -> Path:
        return self.root / state / f"{task_id}.md"

    # -- reading ------------------------------------------------------------

    def ids(self, state: str) -> list[str]:
        names = []
        for entry in os.scandir(self.root / state):
            if entry.name.endswith(".md") and not entry.name.startswith("."):
                names.append(entry.name[:-3])
        return sorted(names)

    def where(self, task_id: str) -> list[str]:
        return [s for s in STATES if self.file(s, task_id).exists()]

    def locate(self, task_id: str) -> str:
        check_id(task_id)
        found = self.where(task_id)
        if not found:
            raise QueueError(f"no task {task_id!r} in {self.root}")
        return found[0]

    def read(self, state: str, task_id: str) -> Task:
        path = self.file(state, task_id)
        return parse(path.read_text(encoding="utf-8"), str(path))

    def tasks(self, state: str) -> list[tuple[Task | None, os.stat_result, str]]:
        out = []
        for tid in self.ids(state):
            path = self.file(state, tid)
            try:
                st = path.stat()
                task = parse(path.read_text(encoding="utf-8"), str(path))
            except FileNotFoundError:
                continue  # moved meanwhile
            except TaskFileError:
                task = None
            out.append((task, st, tid))
        return out

    # -- the lock and locked moves ---------------------------------------------

    @contextmanager
    def locked(self, timeout: float = 30.0):
        self.lock.acquire(timeout, on_dead=self.recover)
        try:
            yield
        finally:
            self.lock.release()

    def recover(self, lock_path: Path) -> str | None:
        """Finish the move a dead lock holder journaled (see the module docstring)."""
        try:
            j = json.loads((lock_path / "journal.json").read_text())
        except (OSError, ValueError):
            return None
        src = self.file(j["src"], j["id"])
        dst = self.file(j["dst"], j["id"])
        if dst.exists():
            return None
        try:
            st = src.stat()
        except FileNotFoundError:
            return None
        if "ctime_ns" in j:
            if st.st_ctime_ns != j["ctime_ns"]:
                return None  # renamed away and claimed back since: not ours any more
        else:
            write_atomic(src, j["content"])
        os.rename(src, dst)
        _fsync_dir(dst.parent)
        return j["id"]

    def _journal(self, data: dict) -> None:
        write_atomic(self.lock.path / "journal.json", json.dumps(data))

    def move(self, task_id: str, src: str, dst: str, edit: Callable[[Task], None] | None = None):
        """Change a task and move it from ``src`` to ``dst``; the caller holds the lock."""
        assert src not in ("todo", "review"), "locked moves never start where claims take from"
        path = self.file(src, task_id)
        task = parse(path.read_text(encoding="utf-8"), str(path))
        if edit is not None:
            edit(task)
        text = task.render()
        journal = {"id": task_id, "src": src, "dst": dst, "content": text}
        self._journal(journal)
        faults.point("tasks.move.journaled")
        write_atomic(path, text)
        faults.point("tasks.move.edited")
        journal["ctime_ns"] = path.stat().st_ctime_ns
        self._journal(journal)
        os.rename(path, self.file(dst, task_id))
        faults.point("tasks.move.renamed")
        _fsync_dir(self.root / dst)
        os.unlink(self.lock.path / "journal.json")
        return task

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
    ) -> tuple[str, str]:
        """Write one task file into todo/ (or backlog/ while a dependency is not done)."""
        if not text.strip():
            raise QueueError("the task text is empty; give it after -- (or - to read stdin)")
        if not done_when.strip():
            raise QueueError("--done-when is empty: say what would fail if the change were wrong")
        if verifiers < 1:
            raise QueueError(f"--verifiers {verifiers}: a task needs at least 1 verifier")
        for dep in depends_on:
            check_id(dep)
        with self.locked():
            task_id = check_id(task_id) if task_id else self.new_id()
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
            ready = all(self.file("done", d).exists() for d in depends_on)
            state = "todo" if ready else "backlog"
            write_atomic(self.file(state, task_id), Task(meta, text.strip() + "\n").render())
            _fsync_dir(self.root / state)
        return task_id, state

    # -- claiming ---------------------------------------------------------------

    def claim(self, role: str, token: str | None = None, info: dict | None = None) -> str | None:
        """Claim the oldest claimable task for ``role`` by rename; None when none is left."""
        src, dst = CLAIMS[role]
        candidates = []
        for tid in self.ids(src):
            try:
                candidates.append((self.file(src, tid).stat().st_ctime_ns, tid))
            except FileNotFoundError:
                continue
        for _, tid in sorted(candidates):
            try:
                os.rename(self.file(src, tid), self.file(dst, tid))
            except FileNotFoundError:
                continue  # another worker won this one
            faults.point("tasks.claim.renamed")
            self.write_heartbeat(tid, dict(info or {}, token=token, role=role))
            return tid
        return None

    # -- heartbeats ---------------------------------------------------------------

    def hb(self, task_id: str) -> Path:
        return self.root / "hb" / task_id

    def write_heartbeat(self, task_id: str, info: dict) -> None:
        write_atomic(self.hb(task_id), json.dumps(dict(info, at=now_iso())) + "\n")

    def touch(self, task_id: str) -> None:
        os.utime(self.hb(task_id))

    def read_heartbeat(self, task_id: str) -> dict | None:
        try:
            return json.loads(self.hb(task_id).read_text())
        except (OSError, ValueError):
            return None

    def holds(self, task_id: str, state: str, token: str) -> bool:
        hb = self.read_heartbeat(task_id)
        return bool(hb and hb.get("token") == token and self.file(state, task_id).exists())

    def drop_heartbeat(self, task_id: str) -> None:
        try:
            os.unlink(self.hb(task_id))
        except FileNotFoundError:
            pass

    def age(self, state: str, task_id: str, now: float | None = None) -> float:
        """Seconds since the last sign of life: the heartbeat's mtime, else (a claimer
        killed before writing it) the claim itself, the rename having set the ctime."""
        now = time.time() if now is None else now
        for p, attr in ((self.hb(task_id), "st_mtime"), (self.file(state, task_id), "st_ctime")):
            try:
                return now - getattr(p.stat(), attr)
            except FileNotFoundError:
                continue
        return 0.0

    # -- transitions (each under the lock, checked against the claim token) ---------

    def _held(self, task_id: str, state: str, token: str | None) -> None:
        if token is not None and not self.holds(task_id, state, token):
            raise QueueError(f"task {task_id} is no longer claimed by this worker (reaped?)")

    def finish_build(self, task_id: str, token: str | None, revision: str | None, provider):
        def edit(t: Task):
            t.meta["revision"] = revision
            t.meta["built_by"] = provider
            t.meta["passes"] = []

        with self.locked():
            self._held(task_id, "doing", token)
            self.move(task_id, "doing", "review", edit)
            self.drop_heartbeat(task_id)

    def fail_build(self, task_id: str, token: str | None, reason: str) -> str:
        with self.locked():
            self._held(task_id, "doing", token)
            return self._fail(task_id, "doing", "Attempt failed", reason)

    def _fail(self, task_id: str, src: str, heading: str, reason: str) -> str:
        t = self.read(src, task_id)
        attempts = t.attempts + 1
        dst = "failed" if attempts >= MAX_ATTEMPTS else "todo"

        def edit(t: Task):
            t.meta["attempts"] = attempts
            t.meta["passes"] = []
            t.append(f"{heading} {attempts} ({now_iso()})", reason)

        self.move(task_id, src, dst, edit)
        self.drop_heartbeat(task_id)
        if dst == "failed":
            announce.task_moved(self.root, task_id, src, dst, reason)
        return dst

    def park(self, task_id: str, token: str | None, question: str) -> None:
        with self.locked():
            self._held(task_id, "doing", token)
            self.move(
                task_id, "doing", "inbox", lambda t: t.append(f"Question ({now_iso()})", question)
            )
            self.drop_heartbeat(task_id)
        announce.task_moved(self.root, task_id, "doing", "inbox", question)

    def answer(self, task_id: str, text: str) -> str:
        if not text.strip():
            raise QueueError("the answer is empty")
        with self.locked():
            state = self.locate(task_id)
            if state != "inbox":
                raise QueueError(f"task {task_id} is in {state}/, not inbox/: it asked nothing")
            self.move(task_id, "inbox", "todo", lambda t: t.append(f"Answer ({now_iso()})", text))
        return "todo"

    def verdict(self, task_id: str, token: str | None, passed: bool, provider, report: str) -> str:
        """A verifier's verdict: done/ once enough verifiers passed it, review/ for the
        next verifier, or back to todo/ (failed/ on the third attempt) with a reject section."""
        with self.locked():
            self._held(task_id, "verifying", token)
            if not passed:
                return self._fail(task_id, "verifying", f"Reject (verifier {provider})", report)
            t = self.read("verifying", task_id)
            passes = [*(t.meta.get("passes") or []), provider]
            dst = "done" if len(passes) >= t.verifiers else "review"

            def edit(t: Task):
                t.meta["passes"] = passes
                if dst == "done":
                    t.meta["done_at"] = now_iso()
                t.append(f"Pass {len(passes)} (verifier {provider}, {now_iso()})", "passed")

            self.move(task_id, "verifying", dst, edit)
            self.drop_heartbeat(task_id)
            if dst == "done":
                self._release()
            return dst

    def unclaim(self, task_id: str, token: str | None) -> str:
        """Give a claim back untouched (orcr would not start its agent): not an attempt."""
        with self.locked():
            state = "doing" if self.file("doing", task_id).exists() else "verifying"
            self._held(task_id, state, token)
            dst = "todo" if state == "doing" else "review"
            self.move(task_id, state, dst)
            self.drop_heartbeat(task_id)
            return dst

    def return_verification(self, task_id: str, token: str | None) -> None:
        """A verification that could not run goes back to review/: not an attempt."""
        with self.locked():
            self._held(task_id, "verifying", token)
            self.move(task_id, "verifying", "review")
            self.drop_heartbeat(task_id)

    def _release(self) -> list[str]:
        released = []
        for task, _st, tid in self.tasks("backlog"):
            if task is not None and all(self.file("done", d).exists() for d in task.depends_on):
                self.move(tid, "backlog", "todo")
                released.append(tid)
        return released

    def release(self) -> list[str]:
        """Move every backlog task whose dependencies are all done to todo/."""
        with self.locked():
            return self._release()

    def reap(self, stale: float, on_reap=None) -> list[tuple[str, str, str]]:
        """Return tasks whose heartbeat went stale: builds to todo/ (attempts + 1,
        failed/ at the cap), verifications to review/ (not an attempt).

        ``on_reap(task_id, heartbeat)`` is called after each, with what the
        heartbeat file said (the agent the dead worker started, to end it)."""
        reaped, ended = [], []
        with self.locked():
            now = time.time()
            for state in ("doing", "verifying"):
                for tid in self.ids(state):
                    age = self.age(state, tid, now)
                    if age <= stale:
                        continue
                    hb = self.read_heartbeat(tid) or {}
                    if state == "doing":
                        why = f"reaped: no heartbeat for {age:.0f}s"
                        dst = self._fail(tid, "doing", "Attempt failed", why)
                    else:
                        self.move(tid, "verifying", "review")
                        self.drop_heartbeat(tid)
                        dst = "review"
                    reaped.append((tid, state, dst))
                    ended.append((tid, hb))
            self._release()
        for tid, hb in ended if on_reap is not None else ():
            on_reap(tid, hb)  # outside the lock: it may talk to the orcr server
        return reaped

    def unlock(self, force: bool = False) -> str:
        """Clear a stale lock after checking its owner is gone."""
        path = self.lock.path
        if not path.exists():
            return "the queue is not locked"
        owner = read_owner(path)
        alive = owner_alive(owner)
        if alive is True:
            raise QueueError(
                f"the lock is held by pid {owner['pid']}, which is alive: not clearing it"
            )
        if alive is None and not force:
            raise QueueError(
                f"cannot tell whether the lock's owner ({owner}) is gone (another host?); "
                "check by hand, then run again with --force"
            )
        (path / "breaking").mkdir(exist_ok=True)
        moved = self.recover(path)
        dead = path.with_name(f".lock-dead-{secrets.token_hex(4)}")
        os.rename(path, dead)
        import shutil

        shutil.rmtree(dead, ignore_errors=True)
        return "cleared the lock" + (f" and finished the move of {moved}" if moved else "")


__all__ = ["Queue", "QueueError", "LockBusy", "STATES", "MAX_ATTEMPTS"]
