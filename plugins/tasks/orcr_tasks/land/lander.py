"""The lander: a merge queue over done/ (``orcr tasks land``, docs/tasks.md "Landing").

For each task, oldest first, claimed done/ -> landing/ like any claim (so two
landers never take the same task): check that what is to land is exactly what
its verifiers passed, bring that revision onto the branch's tip in a scratch
checkout, run the check there, and move the branch to the tested commit only
from the tip that was tested (``git update-ref NEW OLD``); a branch that moved
meanwhile is tried again on its new tip.

Crash safety. Before the branch moves, the lander writes an **intent ref**
(``refs/orcr/land/<queue>/<task>``) naming the tested commit; after the task is
in landed/ it deletes it. A lander killed anywhere is finished by the next one
(on this host at once, its pid being dead; elsewhere once its heartbeat is
stale): its claim goes back to done/, and landing that task again first looks
at the intent ref. Its commit already on the branch means the ref update
happened: the task is marked landed with it, never landed twice. Not on the
branch means the update never happened: the ref is deleted and the task landed
afresh. The branch only ever points at a commit that passed the check, and its
scratch checkout is removed (:func:`orcr_tasks.land.git.prune_scratches`).
"""

from __future__ import annotations

import os
import secrets
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Callable

import psutil

from orcr_core.store import faults
from orcr_tasks.land import git as g
from orcr_tasks.land import moves
from orcr_tasks.land.batch import land_batch
from orcr_tasks.lock import me, owner_alive
from orcr_tasks.moves import reaped_claim

STRATEGIES = ("rebase", "merge")
#: how many times one task is tried again on a branch that keeps moving under it
MAX_RETRIES = 10
#: lines of a red check's output written into the task
TAIL_LINES = 40


class Lander:
    max_retries = MAX_RETRIES

    def __init__(
        self,
        queue,
        repo: str,
        onto: str | None = None,
        check: str | None = None,
        strategy: str = "rebase",
        keep_branches: bool = False,
        heartbeat: float = 30.0,
        stale: float = 600.0,
        say: Callable[[str], None] = print,
    ):
        if strategy not in STRATEGIES:
            raise g.GitError(f"--strategy {strategy!r}: give one of {', '.join(STRATEGIES)}")
        self.q = queue
        self.repo = g.repo_root(repo)
        self.onto = onto or g.current_branch(self.repo)
        if g.commit_of(self.repo, f"refs/heads/{self.onto}") is None:
            raise g.GitError(f"--onto {self.onto!r} is no branch of {self.repo}")
        self.check = check if check is not None else queue.settings().get("land_check")
        self.strategy = strategy
        self.keep_branches = keep_branches
        self.heartbeat = heartbeat
        self.stale = stale
        self.say = say
        self.info = dict(me(), role="lander", onto=self.onto)
        #: where ``orcr top`` sees this lander (the command sets it: an
        #: :class:`orcr_core.kit.activities.Activity`); None: unseen
        self.activity = None
        #: check runs so far (``tasks land`` reports them: tasks landed per check)
        self.checks = 0
        queue.moves.repo = self.repo  # dependants = landed: released against this repository
        if queue.local_root is not None:  # a file queue made before landing/ and landed/
            for folder in ("landing", "landed"):
                (queue.local_root / folder).mkdir(exist_ok=True)

    # -- the loop -------------------------------------------------------------------

    def run(
        self, watch: bool = False, max_landed: int | None = None, poll: float = 2.0, batch: int = 1
    ):
        """Land until done/ is empty (or, with ``watch``, forever); stop after
        ``max_landed`` landings. ``batch`` > 1 lands up to that many tasks with one
        check, bisecting on red (:mod:`orcr_tasks.land.batch`). Returns the count of
        each outcome."""
        counts: Counter = Counter()
        self.recover()
        while max_landed is None or counts["landed"] < max_landed:
            if batch > 1:
                room = batch if max_landed is None else min(batch, max_landed - counts["landed"])
                claims = self.claim_many(room)
                if claims:
                    counts.update(land_batch(self, claims))
                    self.show(None, "next batch", counts)
                    continue
                tid = None
            else:
                token = secrets.token_hex(4)
                tid = self.q.claim("lander", token=token, info=self.info)
            if tid is None:
                if not watch:
                    break
                self.show(None, "waiting for done/", counts)
                time.sleep(poll)
                self.recover()
                continue
            self.show(tid, "claimed", counts)
            counts[self.land(tid, token)] += 1
            self.show(None, "next task", counts)
        return counts

    def claim_many(self, n: int) -> list[tuple[str, str]]:
        """Up to ``n`` done/ tasks claimed, oldest first: ``(task, token)`` each."""
        claims = []
        while len(claims) < n:
            token = secrets.token_hex(4)
            tid = self.q.claim("lander", token=token, info=self.info)
            if tid is None:
                break
            claims.append((tid, token))
        return claims

    def show(self, tid: str | None, step: str, counts: Counter | None = None) -> None:
        """What ``orcr top`` shows of this lander: the task it holds and its step."""
        if self.activity is None:
            return
        fields: dict = {"task": tid, "step": step}
        if counts is not None:
            fields["counts"] = {k: counts[k] for k in ("landed", "failed", "refused") if counts[k]}
        self.activity.update(**fields)

    def recover(self) -> None:
        """Finish what dead landers left: their scratch checkouts, their claims (back to
        done/, to be landed again through the intent ref), the intent refs of tasks
        already in landed/."""
        g.prune_scratches(self.repo, self.q.name, psutil.pid_exists)
        for tid in self.q.ids("landing"):
            hb = self.q.read_heartbeat(tid) or {}
            age = self.q.age("landing", tid)
            if owner_alive(hb) is not False and age <= self.stale:
                continue
            with self.q.locked():
                if not self.q.is_in("landing", tid):
                    continue
                if (self.q.read_heartbeat(tid) or {}).get("token") != hb.get("token"):
                    continue
                self.q.moves._reap_one(tid, "landing", reaped_claim(hb, age))
            self.say(f"{tid}: its lander is gone; back to done/")
        prefix = g.intent_ref(self.q.name, "")
        refs = g.git(self.repo, "for-each-ref", "--format=%(refname)", prefix, check=False)
        for ref in refs.split():
            if self.q.is_in("landed", ref[len(prefix) :]):
                g.git(self.repo, "update-ref", "-d", ref, check=False)

    # -- one task -------------------------------------------------------------------

    def step(self, tid: str, token: str, name: str) -> None:
        """Record the step in the claim's heartbeat (``tasks status`` shows it) and in
        the lander's activity (``orcr top`` does)."""
        self.q.write_heartbeat(tid, dict(self.info, token=token, step=name))
        self.show(tid, name)

    def land(self, tid: str, token: str) -> str:
        try:
            return self._land(tid, token)
        except g.GitError as exc:
            moves.give_back(self.q, tid, token, str(exc))
            self.say(f"{tid}: not landed, back to done/: {exc}")
            return "returned"

    def ready(self, tid: str, token: str):
        """A claimed task's way in: an outcome when it is settled without a check (found
        landed through its intent ref after a restart, refused, its revision already on
        the branch), else ``(task, revision)`` to bring onto the tip and check."""
        task = self.q.read("landing", tid)
        intent = g.intent_ref(self.q.name, tid)
        found = g.commit_of(self.repo, intent)
        tip = g.commit_of(self.repo, f"refs/heads/{self.onto}")
        if found and g.is_ancestor(self.repo, found, tip):
            return self._landed(tid, token, task, found, "found on the branch after a restart")
        if found:  # the ref update never happened: land afresh
            g.git(self.repo, "update-ref", "-d", intent, found)
        refused = self.refusal(task)
        if refused:
            dst = moves.refuse(self.q, tid, token, refused[0], refused[1])
            self.say(f"{tid}: refused -> {dst}/: {refused[0]}")
            return "refused"
        revision = g.commit_of(self.repo, task.meta["revision"])
        if g.is_ancestor(self.repo, revision, tip):
            return self._landed(tid, token, task, revision, "its verified revision was there")
        return task, revision

    def _land(self, tid: str, token: str) -> str:
        ready = self.ready(tid, token)
        if isinstance(ready, str):
            return ready
        task, revision = ready
        for _ in range(MAX_RETRIES):
            tip = g.commit_of(self.repo, f"refs/heads/{self.onto}")
            outcome = self._try(tid, token, task, revision, tip)
            if outcome is not None:
                return outcome
            self.say(f"{tid}: {self.onto} moved while checking; again on its new tip")
        raise g.GitError(f"{self.onto} moved under every one of {MAX_RETRIES} tries")

    def refusal(self, task) -> tuple[str, str] | None:
        """Why ``task`` may not land as it is, and where it goes; None when it may:
        exactly the revision its verifiers passed, still on its branch."""
        rev = task.meta.get("revision")
        if not rev or g.commit_of(self.repo, rev) is None:
            why = "no revision" if not rev else f"its revision {rev} is no commit in {self.repo}"
            return f"{why}: only a commit can land (build with tasks work --worktree)", "inbox"
        rev = g.commit_of(self.repo, rev)
        passes = task.meta.get("passes") or []
        verified = [v for v in task.meta.get("verified") or [] if g.commit_of(self.repo, v) == rev]
        if len(passes) < task.verifiers or len(verified) < task.verifiers:
            return (
                f"{len(verified)} of the {task.verifiers} verifier pass(es) it needs are "
                f"recorded for its revision {rev[:12]} ({len(passes)} pass(es) in all): "
                "back to review/ to be verified",
                "review",
            )
        branch = task.meta.get("branch")
        moved = branch and g.commit_of(self.repo, f"refs/heads/{branch}")
        if moved and moved != rev:
            return (
                f"its branch {branch} moved after its verifiers passed {rev[:12]} (now at "
                f"{moved[:12]}): back to review/ to verify what it holds now",
                "review",
            )
        return None

    def _try(self, tid: str, token: str, task, revision: str, tip: str) -> str | None:
        """One try on ``tip``: the outcome, or None when the branch moved meanwhile."""
        self.step(tid, token, "scratch")
        scratch = g.Scratch(self.repo, self.q.name, tip)
        try:
            faults.point("land.scratch")
            applied = scratch.apply(revision, tip, self.strategy, f"Land {tid}")
            faults.point("land.applied")
            if applied.commit is None:
                why = f"conflicts with {self.onto} at {tip[:12]} ({self.strategy}): " + ", ".join(
                    applied.conflicts
                )
                return self._back(tid, token, why)
            if self.check:
                self.step(tid, token, "check")
                faults.point("land.check_started")
                code, tail = self.run_check([(tid, token)], scratch.path, tip)
                faults.point("land.check_done")
                if code != 0:
                    why = (
                        f"the check `{self.check}` failed (exit {code}) on {self.onto} at "
                        f"{tip[:12]} with it applied as {applied.commit[:12]}:\n\n{tail}"
                    )
                    return self._back(tid, token, why)
            self.step(tid, token, "update")
            intent = g.intent_ref(self.q.name, tid)
            g.git(self.repo, "update-ref", intent, applied.commit)
            faults.point("land.intent")
            if not g.compare_and_swap(self.repo, self.onto, applied.commit, tip):
                g.git(self.repo, "update-ref", "-d", intent, applied.commit, check=False)
                return None
            faults.point("land.ref_updated")
            note = g.sync_checkout(self.repo, self.onto, tip, applied.commit)
            if note:
                self.say(f"{tid}: {note}")
            checked = f"checked with `{self.check}`" if self.check else "no check configured"
            return self._landed(tid, token, task, applied.commit, f"on {tip[:12]}, {checked}")
        finally:
            scratch.remove()

    def run_check(self, claims: list[tuple[str, str]], cwd, tip: str) -> tuple[int, str]:
        """The check in the scratch checkout, the heartbeat of each claim (a batch's:
        several) touched while it runs. ``ORCR_LAND_TASK`` names them, space separated."""
        self.checks += 1
        tasks = " ".join(tid for tid, _ in claims)
        env = dict(os.environ, ORCR_LAND_TASK=tasks, ORCR_LAND_REPO=self.repo, ORCR_LAND_TIP=tip)
        with tempfile.TemporaryFile() as out:
            proc = subprocess.Popen(
                ["sh", "-c", self.check], cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env=env
            )
            while True:
                try:
                    code = proc.wait(timeout=self.heartbeat)
                    break
                except subprocess.TimeoutExpired:
                    for tid, token in claims:
                        self.q.touch(tid, token)
            out.seek(0)
            text = out.read().decode(errors="replace")
        return code, "\n".join(text.rstrip().splitlines()[-TAIL_LINES:])

    def _back(self, tid: str, token: str, why: str) -> str:
        dst = moves.send_back(self.q, tid, token, why)
        self.say(f"{tid}: land failed -> {dst}/: {why.splitlines()[0]}")
        return "failed"

    def _landed(self, tid: str, token: str, task, commit: str, how: str) -> str:
        moves.mark_landed(self.q, tid, token, commit, self.onto, f"{commit} on {self.onto}: {how}")
        faults.point("land.moved")
        g.git(self.repo, "update-ref", "-d", g.intent_ref(self.q.name, tid), check=False)
        self.drop_branch(task)
        self.say(f"{tid}: landed {commit[:12]} on {self.onto}")
        return "landed"

    def drop_branch(self, task) -> None:
        """The builder's branch goes once its work landed (``--keep-branches`` keeps it),
        unless a checkout still has it."""
        branch = task.meta.get("branch")
        if self.keep_branches or not branch or branch == self.onto:
            return
        held = g.git(self.repo, "worktree", "list", "--porcelain", check=False)
        if f"branch refs/heads/{branch}\n" in held + "\n":
            return
        g.git(self.repo, "branch", "-D", branch, check=False)
