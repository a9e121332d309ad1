"""The worker loop: claim, start a fresh agent through orcr, heartbeat, collect.

Each slot is a thread running :meth:`Worker.run_slot`. The heartbeat is
touched by the loop itself while it waits on the agent, never by the model,
and the agent's ``--timeout`` ends a model that hangs while its loop is alive.
What the agents are told and what their answers mean is in
:mod:`orcr_tasks.prompts`.

A worker rides an orcr server restart, keeping its claim, without charging an
attempt: :mod:`orcr_tasks.outage` (:meth:`Worker.ride`).

One task is worked in three steps, each its own method, so a step can be
changed alone: :meth:`Worker.workspace` (where the agent runs),
:meth:`Worker.run_agent` (start it, heartbeat, read its answer) and
:meth:`Worker.build` / :meth:`Worker.verify` (what the answer does to the task).
"""

from __future__ import annotations

import os
import secrets
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from orcr_core.sdk.client import ServerError
from orcr_tasks import checkouts, spent
from orcr_tasks.guard import end_agent
from orcr_tasks.location import agent_segment, whereabouts
from orcr_tasks.lock import LockBusy
from orcr_tasks.logline import write_line
from orcr_tasks.outage import OUTAGE, ServerOutage
from orcr_tasks.outage import ride as ride_outage
from orcr_tasks.prompts import (
    UNVERIFIABLE,
    answered_questions,
    builder_prompt,
    installed_families,
    last_line,
    pick_verifier_provider,
    verdict_of,
    verifier_prompt,
)
from orcr_tasks.queue import Queue, QueueError
from orcr_tasks.taskfile import TaskFileError

REAPED = "the claim was reaped"


class AgentRefused(Exception):
    """orcr refused to admit the agent: a wrong provider, a bad path, no server."""


def clip(text: str, limit: int) -> str:
    """``text`` on one line, at most ``limit`` characters, cut at a word boundary."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0]
    return f"{cut} ..."


def inside(path: Path, root: Path) -> bool:
    p, r = path.resolve(), root.resolve()
    return p == r or r in p.parents


@dataclass
class Worker:
    queue: Queue
    role: str
    slots: int = 1
    providers: list[str] = field(default_factory=list)
    timeout: float | None = None
    heartbeat: float = 30.0
    stale: float = 600.0
    cwd: str | None = None
    drain: bool = False
    poll: float = 2.0
    sdk_factory: object = None
    log: object = None
    #: how long an orcr outage is ridden (default: ``stale``)
    outage: float | None = None
    #: each agent in an orcr checkout of its own (orcr_tasks.checkouts)
    worktree: bool = False
    model: str | None = None  # per-run provider options (a task's ``model:`` wins)
    #: --sandbox/--no-sandbox for every agent it starts (None: orcr's [sandbox] default)
    sandbox: bool | None = None
    args: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    refused: str | None = None
    last_agent: dict = field(default_factory=dict)  # task id -> its latest agent's uuid
    #: start the claim guard beside the worker (orcr_tasks.guard): the CLI does
    guard: bool = False

    def __post_init__(self) -> None:
        # a worker's finished work must not be dropped because 30 busy workers queue
        # for the lock: it waits as long as half a stale heartbeat (the owner is alive)
        self.queue.lock_wait = max(self.queue.lock_wait, self.stale / 2)
        self.queue.moves.repo = checkouts.repo_root(self.cwd or os.getcwd())  # dependants = landed

    def say(self, msg: str) -> None:
        write_line(self.log or sys.stderr, f"orcr tasks [{self.role}] {msg}")  # whole lines

    def run(self) -> None:
        root = self.queue.local_root
        if (
            self.role == "verifier"
            and root is not None
            and inside(Path(self.cwd or os.getcwd()), root)
        ):
            raise QueueError(
                f"the verifiers' working directory {Path(self.cwd or os.getcwd()).resolve()} "
                f"is inside the queue {root}, where the builder's report lives: "
                "run from (or give --cwd) the checkout to verify"
            )
        guard = None
        if self.guard:  # ends this host's agents whose claims are gone, even after we die
            from orcr_tasks import guard as claim_guard

            guard = claim_guard.spawn(self.queue.spec, self.heartbeat, self.stale)
        threads = [
            threading.Thread(target=self.run_slot, args=(n,), daemon=True)
            for n in range(self.slots)
        ]
        for t in threads:
            t.start()
        try:
            for t in threads:
                while t.is_alive():
                    t.join(0.5)
        except KeyboardInterrupt:
            self.stop.set()
            raise
        finally:
            if guard is not None:
                guard.stdin.close()  # the guard sweeps once more and exits
        if self.refused:
            raise QueueError(f"stopped: {self.refused}")

    def reap(self, orcr) -> None:
        try:
            for tid, src, dst in self.queue.moves.reap(self.stale, end_agent(orcr, self.say)):
                if dst == "quarantine":
                    self.say(f"{tid}: {src}/{tid}.md is not a readable task -> quarantine/")
                else:
                    self.say(f"{tid}: heartbeat stale, reaped from {src}/ -> {dst}/")
        except Exception as exc:  # a reap never stops a slot
            self.say(f"reap: {type(exc).__name__}: {exc}")

    def unreadable(self, tid: str, moved: str, why: str) -> None:
        self.say(f"{tid}: not a readable task, never claimed; moved to {moved}: {why}")

    def run_slot(self, n: int) -> None:
        orcr = self.sdk_factory()
        here = whereabouts()
        reaped_at = 0.0
        try:
            while not self.stop.is_set():
                if time.monotonic() - reaped_at >= min(self.heartbeat, self.stale):
                    reaped_at = time.monotonic()
                    self.reap(orcr)
                token = secrets.token_hex(4)
                info = {"pid": os.getpid(), "slot": n, **here}
                try:
                    tid = self.queue.claim(self.role, token, info, self.unreadable)
                except OSError as exc:
                    self.say(f"claim: {exc}")
                    tid = None
                if tid is None:
                    if self.drain:
                        return
                    self.stop.wait(self.poll)
                    continue
                self.work_one(orcr, tid, token)
        finally:
            orcr.close()

    def work_one(self, orcr, tid: str, token: str) -> None:
        state = "doing" if self.role == "builder" else "verifying"
        try:
            if self.role == "builder":
                self.build(orcr, tid, token)
            else:
                self.verify(orcr, tid, token)
        except TaskFileError as exc:  # replaced by an unreadable file after the check
            with self.queue.locked():
                moved = self.queue.quarantine(state, tid, str(exc), force=True)
            self.unreadable(tid, moved or f"{state}/", str(exc))
        except (AgentRefused, ServerOutage) as exc:
            # the worker's setup is wrong, or orcr is down, not the task: give it back
            # untouched (not an attempt) and stop, rather than use up every task's attempts
            try:
                self.queue.moves.unclaim(tid, token)
                back = "the task went back untouched"
            except (QueueError, LockBusy) as err:
                back = f"the task could not be given back ({err})"
            self.refused = f"{tid}: {exc}; {back}"
            self.say(self.refused)
            self.stop.set()
        except (QueueError, LockBusy) as exc:
            self.say(f"{tid}: {exc}")
        except Exception as exc:
            # the claim stays in doing/verifying and is reaped when its heartbeat goes
            # stale; this slot goes on with the next task
            self.say(f"{tid}: {type(exc).__name__}: {exc}; leaving it to the reaper")

    # -- riding an orcr outage ------------------------------------------------

    def ride(self, orcr, tid: str, what: str, call, token: str | None = None):
        """``call()``, retried on a fresh connection while the orcr server is away,
        with the claim's heartbeat kept fresh meanwhile (only while ``token`` holds it)."""

        def away(exc: Exception) -> None:
            self.say(
                f"{tid}: the orcr server is away while {what} ({exc}); "
                "keeping the claim and its heartbeat, reconnecting"
            )

        def keep_claim() -> None:
            try:
                self.queue.touch(tid, token)
            except FileNotFoundError:
                pass  # reaped: the caller's next holds() check says so

        limit = self.stale if self.outage is None else self.outage
        return ride_outage(
            orcr, call, away=away, keep_claim=keep_claim, stop=self.stop, limit=limit,
            heartbeat=self.heartbeat,
        )  # fmt: skip

    # -- one agent ----------------------------------------------------------

    def workspace(self, tid: str, task) -> str | None:
        """The agent's working directory for this task (``--cwd``, else the worker's)."""
        return self.cwd

    def start_agent(
        self, orcr, tid: str, prompt: str, provider, path: str, cwd, opts=None, token=None
    ):
        """Admit the agent; an outage mid-admission is ridden, and an agent the lost
        request did admit is found by its path rather than started twice."""
        tried = []

        def admit():
            if tried:  # a request was lost with the connection: did it admit the agent?
                try:
                    return orcr.get(path)
                except ServerError as exc:
                    if exc.code != "not_found":
                        raise
            tried.append(True)
            try:
                return orcr.run(
                    prompt, provider=provider, path=path, cwd=cwd, timeout=self.timeout,
                    **(opts or {}),
                )  # fmt: skip
            except ServerError as exc:
                if exc.code in OUTAGE:
                    raise
                raise AgentRefused(f"orcr would not start the agent: {exc}") from exc

        return self.ride(orcr, tid, "starting its agent", admit, token)

    def agent_options(self, task, kind: str, tid: str, token: str) -> dict:
        """``--model``/``--arg`` (a task's ``model:`` first), ``--sandbox`` and, with
        ``--worktree``, the attempt's checkout (:mod:`orcr_tasks.checkouts`)."""
        opts: dict = {}
        model = task.meta.get("model") or self.model
        if model:
            opts["model"] = model
        if self.args:
            opts["args"] = list(self.args)
        if self.sandbox is not None:  # builders and verifiers alike (docs/sandbox.md)
            opts["sandbox"] = self.sandbox
        if self.worktree:
            opts["worktree"] = True
            opts["branch"] = checkouts.branch(self.queue.name, tid, kind, task.attempts + 1, token)
            if kind == "verify":
                opts["base"] = task.meta.get("revision")
        return opts

    def run_agent(
        self, orcr, tid: str, token: str, state: str, prompt: str, provider, kind, cwd, opts=None
    ):
        """Start the agent, heartbeat while it works; returns (answer, error)."""
        from orcr_core.sdk import AgentEnded, WaitTimeout

        path = f"tasks/{self.queue.name}/{agent_segment(tid)}/{kind}_{token}"
        agent = self.start_agent(orcr, tid, prompt, provider, path, cwd, opts, token)
        self.last_agent[tid] = agent["uuid"]
        # only into this claim's heartbeat: a claim reaped meanwhile (and perhaps taken
        # by another worker) never gets this agent written into it
        self.queue.note_agent(tid, token, {"agent": agent["path"], "uuid": agent["uuid"]})
        self.say(f"{tid}: started {agent['path']}")
        try:
            while True:
                if not self.queue.holds(tid, state, token):
                    return None, REAPED
                self.queue.touch(tid, token)
                try:
                    self.ride(
                        orcr,
                        tid,
                        "its agent works",
                        lambda: orcr.wait(agent["uuid"], until="idle", timeout=self.heartbeat),
                        token,
                    )
                    break
                except WaitTimeout:
                    continue
                except AgentEnded as exc:
                    return None, str(exc)
            res = self.ride(
                orcr, tid, "reading its answer", lambda: orcr.read(agent["uuid"]), token
            )
            if not res.get("text"):
                why = f"the agent's turn ended {res.get('turn_status') or 'with no turn'}"
                err = res.get("error")
                return None, f"{why}: {err}" if err else f"{why} with no answer"
            return res["text"], None
        finally:
            try:
                self.ride(orcr, tid, "ending its agent", lambda: orcr.kill(agent["uuid"]), token)
            except Exception:  # already ended, or orcr stayed away
                pass
            spent.record(self.queue, orcr, tid, agent["uuid"], self.say)  # for every host

    def build(self, orcr, tid: str, token: str) -> None:
        task = self.queue.read("doing", tid)
        provider = task.meta.get("provider") or (self.providers[0] if self.providers else None)
        opts = self.agent_options(task, "build", tid, token)
        why = self.worktree and checkouts.start_options(self.queue, task, self.cwd, opts)
        if why:  # its dependencies' revisions do not merge: a human decides
            self.queue.moves.park(tid, token, why, heading="Refused")
            return self.say(f"{tid}: refused ({clip(why, 300)}) -> inbox/")
        prompt, cwd = builder_prompt(self.queue, task), self.workspace(tid, task)
        answer, error = self.run_agent(
            orcr, tid, token, "doing", prompt, provider, "build", cwd, opts
        )
        if error == REAPED:
            self.say(f"{tid}: {error}")
            return
        if error is not None:
            return self.fail(orcr, tid, token, error[:4000])
        question = last_line(answer, "QUESTION")
        if question and question not in answered_questions(task):
            self.queue.moves.park(tid, token, question)
            self.say(f"{tid}: parked in inbox/: {question}")
            return
        revision, branch = last_line(answer, "REVISION"), None
        if self.worktree:  # the revision must be a commit this attempt made
            wt = orcr.get(self.last_agent[tid]).get("worktree")
            revision, why = checkouts.check_revision(wt, revision)
            if why:
                return self.fail(orcr, tid, token, why)
            branch = wt["branch"]
        # one writer: the results file is written under the lock, by the claim's holder
        results = answer.rstrip() + "\n"
        self.queue.moves.finish_build(tid, token, revision, provider or "default", results, branch)
        self.say(f"{tid}: built -> review/")
        if self.worktree and not self.queue.settings().get("keep_checkouts"):
            self.drop_checkout(orcr, tid, "the built attempt's")  # its branch holds the work

    def fail(self, orcr, tid: str, token: str, why: str) -> None:
        """A failed attempt: with ``--worktree`` its branch is recorded in the task's
        ``## Attempt failed`` section, then its checkout is removed (the branch stays)."""
        uuid = self.last_agent.get(tid) if self.worktree else None
        note = checkouts.branch_note(orcr, uuid) if uuid else ""
        dst = self.queue.moves.fail_build(tid, token, why + note)
        self.say(f"{tid}: attempt failed ({clip(why, 300)}) -> {dst}/")
        if uuid:
            self.drop_checkout(orcr, tid, "the failed attempt's")

    def drop_checkout(self, orcr, tid: str, whose: str) -> None:
        """Remove the checkout of the task's latest agent; a branch with commits stays."""
        try:
            checkouts.drop_checkout(orcr, self.last_agent.pop(tid))
        except Exception as exc:  # kept by orcr; orcr worktree rm (or prune) removes it
            self.say(f"{tid}: {whose} checkout was not removed: {exc}")

    def verify(self, orcr, tid: str, token: str) -> None:
        task = self.queue.read("verifying", tid)
        if self.worktree and not task.meta.get("revision"):
            why = "no revision to check out (--worktree): not an attempt"
            self.queue.moves.return_verification(tid, token, why)
            self.say(f"{tid}: {why} -> review/")
            return
        used = list(task.meta.get("passes") or [])
        candidates = self.providers or installed_families()
        provider = pick_verifier_provider(task.meta.get("built_by"), used, candidates)
        prompt, cwd = verifier_prompt(task), self.workspace(tid, task)
        opts = self.agent_options(task, "verify", tid, token)
        answer, error = self.run_agent(
            orcr, tid, token, "verifying", prompt, provider, "verify", cwd, opts
        )
        if self.worktree and tid in self.last_agent:  # a fresh checkout per verdict
            self.drop_checkout(orcr, tid, "the verifier's")
        if error == REAPED:
            self.say(f"{tid}: {error}")
            return
        if error is not None:
            why = f"the verification could not run ({error}): not an attempt"
            self.queue.moves.return_verification(tid, token, why)
            self.say(f"{tid}: verification could not run ({error}) -> review/")
            return
        passed = verdict_of(answer)
        if passed is None:
            why = (
                f"the verifier ({provider or 'default'}) gave no VERDICT line: not an "
                "attempt; the task waits for the next verifier"
            )
            self.queue.moves.return_verification(tid, token, why)
            self.say(f"{tid}: no VERDICT line in the verifier's answer -> review/")
            return
        verdict = last_line(answer, "VERDICT")
        report = verdict + "\n\n" + answer.strip()
        if passed == UNVERIFIABLE:  # a question for a person (inbox/), never done/
            self.queue.moves.unverifiable(tid, token, provider or "default", report)
            return self.say(f"{tid}: unverifiable -> inbox/")
        dst = self.queue.moves.verdict(tid, token, passed, provider or "default", report)
        self.say(f"{tid}: {'passed' if passed else 'rejected'} -> {dst}/")


__all__ = ["Worker", "AgentRefused", "ServerOutage", "OUTAGE", "end_agent", "answered_questions",
           "builder_prompt", "installed_families", "last_line", "pick_verifier_provider",
           "verifier_prompt"]  # fmt: skip
