"""The locked moves of a queue: each takes the queue lock, checks that the
caller still holds its claim (its token in the heartbeat file) and moves the
task with :meth:`Queue.move` (journaled, crash safe; see :mod:`orcr_tasks.queue`).

A part, not a mixin: each backend holds one as ``queue.moves``
(:class:`orcr_tasks.queue.Queue`, :class:`orcr_tasks.pg.PgQueue`), so the storage
rules (reading, claiming, the journal or the transaction) and the task's life
(attempts, verdicts, the reaper) each stay in one room, and the life sees the storage
only through :class:`orcr_tasks.backend.Backend`.
"""

from __future__ import annotations

from orcr_tasks import announce, checkouts
from orcr_tasks.backend import Backend, QueueError
from orcr_tasks.files import now_iso
from orcr_tasks.taskfile import Task, TaskFileError

MAX_ATTEMPTS = 3
#: the states of a task a verifier passed: its dependants count it as done
VERIFIED = ("done", "landing", "landed")


def reaped_claim(hb: dict, age: float) -> str:
    """What a reap writes into the task file about the claim it ended, so a worker told
    its claim was reaped finds it recorded there (never silent): who held it, its token
    and its agent."""
    who = "/".join(str(hb[k]) for k in ("host", "pid") if hb.get(k)) or "unknown"
    parts = [f"no heartbeat for {age:.0f}s", f"claim {hb.get('token') or '-'} of worker {who}"]
    if hb.get("slot") is not None:
        parts[-1] += f" slot {hb['slot']}"
    if hb.get("agent") or hb.get("uuid"):
        parts.append(f"agent {hb.get('agent') or hb.get('uuid')} ended")
    return "reaped: " + "; ".join(parts)


class Moves:
    """The task's life over one backend: a part each backend holds as ``moves``.

    It sees the backend only through :class:`Backend` (reads, ``locked``, ``move``,
    claims and heartbeats), so the rules are written once for the folder queue and
    PostgreSQL, and a third backend gets them by implementing that interface.
    """

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        #: the git repository ``dependants = landed`` checks (a worker's ``--cwd``);
        #: with none, that mode releases nothing (a worker that has one does)
        self.repo: str | None = None

    def _landed(self, depends_on: list[str], conf: dict) -> bool:
        """Whether dependants of ``depends_on`` (all done) may leave backlog/ under the
        queue's ``dependants`` setting (:mod:`orcr_tasks.settings`)."""
        if conf.get("dependants") != "landed" or not depends_on:
            return True
        if self.repo is None:
            return False
        metas = [self.backend.read(self.verified_in(d), d).meta for d in depends_on]
        revisions = [m.get("landed_commit") or m.get("revision") for m in metas]
        return checkouts.landed(self.repo, conf.get("base"), revisions)

    def verified_in(self, task_id: str) -> str | None:
        """The state of ``task_id`` when a verifier passed it (done/, landing/, landed/)."""
        return next((s for s in self.backend.where(task_id) if s in VERIFIED), None)

    def _held(self, task_id: str, state: str, token: str | None) -> None:
        if token is not None and not self.backend.holds(task_id, state, token):
            raise QueueError(f"task {task_id} is no longer claimed by this worker (reaped?)")

    def finish_build(
        self, task_id: str, token: str | None, revision: str | None, provider, results=None,
        branch: str | None = None,
    ):  # fmt: skip
        """Built: to review/. ``results`` (the builder's report) becomes ``results/T.md``
        under the lock, after the claim is checked: one writer (the backend stages it
        first, so the lock is held for a rename or one statement only)."""

        def edit(t: Task):
            t.meta["revision"] = revision
            if branch:  # tasks work --worktree: the attempt's branch, to merge once done
                t.meta["branch"] = branch
            t.meta["built_by"] = provider
            t.meta["passes"] = []
            t.meta["verified"] = []

        staged = None if results is None else self.backend.stage_results(task_id, results)
        try:
            with self.backend.locked():
                self._held(task_id, "doing", token)
                if staged is not None:
                    self.backend.commit_results(task_id, token, staged)
                    staged = None
                self.backend.move(task_id, "doing", "review", edit)
        finally:
            if staged is not None:
                self.backend.discard_results(staged)

    def fail_build(self, task_id: str, token: str | None, reason: str) -> str:
        with self.backend.locked():
            self._held(task_id, "doing", token)
            return self._fail(task_id, "doing", "Attempt failed", reason)

    def _fail(self, task_id: str, src: str, heading: str, reason: str) -> str:
        t = self.backend.read(src, task_id)
        attempts = t.attempts + 1
        dst = "failed" if attempts >= MAX_ATTEMPTS else "todo"

        def edit(t: Task):
            t.meta["attempts"] = attempts
            t.meta["passes"] = []
            t.meta["verified"] = []
            t.append(f"{heading} {attempts} ({now_iso()})", reason)

        self.backend.move(
            task_id, src, dst, edit, announce.prepare(self.backend.label, task_id, src, dst, reason)
        )
        return dst

    def park(self, task_id: str, token: str | None, question: str, heading="Question") -> None:
        """To inbox/ with a ``## Question`` (or ``heading``) section: not an attempt."""
        with self.backend.locked():
            self._held(task_id, "doing", token)
            notice = announce.prepare(self.backend.label, task_id, "doing", "inbox", question)
            self.backend.move(
                task_id,
                "doing",
                "inbox",
                lambda t: t.append(f"{heading} ({now_iso()})", question),
                notice,
            )

    def answer(self, task_id: str, text: str) -> str:
        if not text.strip():
            raise QueueError("the answer is empty")
        with self.backend.locked():
            state = self.backend.locate(task_id)
            if state != "inbox":
                raise QueueError(f"task {task_id} is in {state}/, not inbox/: it asked nothing")
            self.backend.move(
                task_id, "inbox", "todo", lambda t: t.append(f"Answer ({now_iso()})", text)
            )
        return "todo"

    def verdict(self, task_id: str, token: str | None, passed: bool, provider, report: str) -> str:
        """A verifier's verdict: done/ once enough verifiers passed it, review/ for the
        next verifier, or back to todo/ (failed/ on the third attempt) with a reject section."""
        with self.backend.locked():
            self._held(task_id, "verifying", token)
            if not passed:
                return self._fail(task_id, "verifying", f"Reject (verifier {provider})", report)
            t = self.backend.read("verifying", task_id)
            passes = [*(t.meta.get("passes") or []), provider]
            dst = "done" if len(passes) >= t.verifiers else "review"

            def edit(t: Task):
                t.meta["passes"] = passes
                # the revision this verifier passed: a lander lands only that (tasks land)
                t.meta["verified"] = [*(t.meta.get("verified") or []), t.meta.get("revision")]
                if dst == "done":
                    t.meta["done_at"] = now_iso()
                t.append(f"Pass {len(passes)} (verifier {provider}, {now_iso()})", "passed")

            self.backend.move(task_id, "verifying", dst, edit)
            if dst == "done":
                self._release()
            return dst

    def unverifiable(self, task_id: str, token: str | None, provider, report: str) -> None:
        """``VERDICT: unverifiable``: the verifier could not run the finish condition. To
        inbox/ as a question for a person (``tasks answer`` sends it back to be rebuilt),
        never to done/; not an attempt, and its earlier passes stand."""
        with self.backend.locked():
            self._held(task_id, "verifying", token)
            head = f"Unverifiable (verifier {provider}, {now_iso()})"
            notice = announce.prepare(self.backend.label, task_id, "verifying", "inbox", report)
            self.backend.move(
                task_id, "verifying", "inbox", lambda t: t.append(head, report), notice
            )

    def unclaim(self, task_id: str, token: str | None) -> str:
        """Give a claim back untouched (orcr would not start its agent): not an attempt."""
        with self.backend.locked():
            state = "doing" if self.backend.is_in("doing", task_id) else "verifying"
            self._held(task_id, state, token)
            dst = "todo" if state == "doing" else "review"
            self.backend.move(task_id, state, dst)
            return dst

    def return_verification(self, task_id: str, token: str | None, why: str | None = None):
        """A verification that could not run, or gave no verdict, goes back to review/:
        not an attempt. ``why`` is noted in a ``## Verification returned`` section."""

        def edit(t: Task):
            t.append(f"Verification returned ({now_iso()})", why)

        with self.backend.locked():
            self._held(task_id, "verifying", token)
            self.backend.move(task_id, "verifying", "review", edit if why else None)

    def _release(self) -> list[str]:
        self.backend.before_release()
        released, conf = [], None
        for task, _st, tid in self.backend.tasks("backlog"):
            if task is not None and all(self.verified_in(d) for d in task.depends_on):
                conf = conf or self.backend.settings()
                if not self._landed(task.depends_on, conf):
                    continue  # dependants = landed: not on the base branch yet
                self.backend.move(tid, "backlog", "todo")
                released.append(tid)
        return released

    def release(self) -> list[str]:
        """Move every backlog task whose dependencies are all done (with ``dependants =
        landed``: and on the base branch) to todo/."""
        with self.backend.locked():
            return self._release()

    def reap(self, stale: float, on_reap=None) -> list[tuple[str, str, str]]:
        """Return tasks whose heartbeat went stale: builds to todo/ (attempts + 1,
        failed/ at the cap), verifications to review/ (not an attempt). A stale
        claim whose file is not a readable task goes to quarantine/, as it is.

        ``on_reap(task_id, heartbeat)`` is called after each, with what the
        heartbeat file said (the agent the dead worker started, to end it)."""
        b = self.backend
        reaped, ended = [], []
        with b.locked():
            for tid, state, hb, age in b.stale_claims(stale):
                try:
                    b.read(state, tid)
                except FileNotFoundError:
                    continue
                except (TaskFileError, OSError) as exc:
                    moved = b.quarantine(state, tid, str(exc), force=True)
                    if moved:
                        reaped.append((tid, state, moved.split("/")[0]))
                        ended.append((tid, hb))
                    continue
                dst = self._reap_one(tid, state, reaped_claim(hb, age))
                reaped.append((tid, state, dst))
                ended.append((tid, hb))
            self._release()
        b.flush_notices()  # a mover killed between its commit and its notice left one
        for tid, hb in ended if on_reap is not None else ():
            on_reap(tid, hb)  # outside the lock: it may talk to the orcr server
        return reaped

    def _reap_one(self, tid: str, state: str, why: str) -> str:
        """A stale build to todo/ (an attempt), a stale verification to review/ (not
        one); either way the task file records the claim that was reaped."""
        if state == "doing":
            return self._fail(tid, "doing", "Attempt failed", why)
        if state == "landing":  # a lander's claim: back to done/, not an attempt
            self.backend.move(
                tid, "landing", "done", lambda t: t.append(f"Land reaped ({now_iso()})", why)
            )
            return "done"
        self.backend.move(
            tid,
            "verifying",
            "review",
            lambda t: t.append(f"Verification reaped ({now_iso()})", why),
        )
        return "review"
