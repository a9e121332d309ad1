"""The worker loop: claim, start a fresh agent through orcr, heartbeat, collect.

Each slot is a thread running :func:`run_slot`. The heartbeat is touched by
the loop itself while it waits on the agent, never by the model, and the
agent's ``--timeout`` ends a model that hangs while its loop is alive.

What an agent answers is read by ``orcr agent read``; three line prefixes in
the answer mean something (the last such line wins):

* ``QUESTION: ...`` (builder): park the task in inbox/ and move on.
* ``REVISION: ...`` (builder): the revision the verifier is to check.
* ``VERDICT: pass`` / ``VERDICT: reject <why>`` (verifier); no verdict line
  is a reject.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import socket
import sys
import threading
import time
from dataclasses import dataclass, field

from orcr_tasks.lock import LockBusy
from orcr_tasks.queue import Queue, QueueError, agent_segment, write_atomic
from orcr_tasks.taskfile import Task

#: providers of distinct model families, in order of preference for verifiers
MODEL_FAMILIES = ("claude", "codex")


def last_line(text: str, key: str) -> str | None:
    found = re.findall(rf"^[ \t>*_`]*{key}:[ \t]*(.*)$", text or "", re.M | re.I)
    return found[-1].strip() if found else None


def answered_questions(task: Task) -> set[str]:
    """Questions the coordinator already answered: asking one again does not park."""
    asked = re.findall(r"^## Question[^\n]*\n+(.*?)\n+(?=## |\Z)", task.body, re.M | re.S)
    return {q.strip() for q in asked} if "## Answer" in task.body else set()


def builder_prompt(queue: Queue, task: Task) -> str:
    """The task text first (so an agent's leading directives work), then the rules."""
    return (
        f"{task.body.strip()}\n\n"
        f"----\n"
        f"This is task {task.id} of the task queue {queue.root}. It is done when: "
        f"{task.meta.get('done_when', '')}\n"
        "Do the work, then answer with a short report. Write the revision a verifier should "
        "check on a line of its own that starts with the word REVISION and a colon. If only "
        "the coordinator can answer a question that blocks you, write it on a line that "
        "starts with the word QUESTION and a colon, and stop.\n"
    )


def verifier_prompt(queue: Queue, task: Task) -> str:
    """What a verifier sees: the finish condition, the revision, the task's own text.
    Never the builder's results or reasoning (rule: a persuasive write-up makes it
    easier to approve wrong work)."""
    return (
        f"{task.meta.get('done_when', '')}\n\n"
        f"----\n"
        f"Verify task {task.id} of the task queue {queue.root}: check that the condition "
        f"above holds at revision {task.meta.get('revision') or '(none given)'} by running "
        "it, not by reading a diff and deciding. The task was:\n\n"
        f"{task.text}\n\n"
        "End your answer with a line that starts with the word VERDICT and a colon, then "
        "pass, or reject and why.\n"
    )


def installed_families() -> list[str]:
    return [p for p in MODEL_FAMILIES if shutil.which(p)]


def pick_verifier_provider(
    builder: str | None, used: list[str], candidates: list[str]
) -> str | None:
    """Another provider than the builder's (and than earlier verifiers') where one
    is available; the builder's own only when nothing else is."""
    for p in candidates:
        if p != builder and p not in used:
            return p
    for p in candidates:
        if p != builder:
            return p
    return candidates[0] if candidates else builder


class AgentRefused(Exception):
    """orcr refused to admit the agent: a wrong provider, a bad path, no server."""


def end_agent(orcr):
    """An ``on_reap`` callback: end the agent a reaped claim had started, if it runs."""

    def kill(tid: str, hb: dict) -> None:
        if hb.get("uuid"):
            try:
                orcr.kill(hb["uuid"])
            except Exception:  # already ended, or no server: nothing to end
                pass

    return kill


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
    stop: threading.Event = field(default_factory=threading.Event)
    refused: str | None = None

    def say(self, msg: str) -> None:
        print(f"orcr tasks [{self.role}] {msg}", file=self.log or sys.stderr, flush=True)

    def run(self) -> None:
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
        if self.refused:
            raise QueueError(f"stopped: {self.refused}")

    def run_slot(self, n: int) -> None:
        orcr = self.sdk_factory()
        reaped_at = 0.0
        try:
            while not self.stop.is_set():
                if time.monotonic() - reaped_at >= min(self.heartbeat, self.stale):
                    reaped_at = time.monotonic()
                    try:
                        for tid, src, dst in self.queue.reap(self.stale, end_agent(orcr)):
                            self.say(f"{tid}: heartbeat stale, reaped from {src}/ -> {dst}/")
                    except LockBusy as exc:
                        self.say(str(exc))
                token = secrets.token_hex(4)
                info = {"pid": os.getpid(), "host": socket.gethostname(), "slot": n}
                tid = self.queue.claim(self.role, token, info)
                if tid is None:
                    if self.drain:
                        return
                    self.stop.wait(self.poll)
                    continue
                try:
                    if self.role == "builder":
                        self.build(orcr, tid, token)
                    else:
                        self.verify(orcr, tid, token)
                except AgentRefused as exc:
                    # the worker's setup is wrong (or orcr is down), not the task: give it
                    # back untouched and stop, rather than use up every task's attempts
                    self.queue.unclaim(tid, token)
                    self.refused = f"{tid}: {exc}; the task went back untouched"
                    self.say(self.refused)
                    self.stop.set()
                except (QueueError, LockBusy) as exc:
                    self.say(f"{tid}: {exc}")
                except Exception as exc:  # e.g. the server went away mid-task
                    # the claim stays in doing/verifying and is reaped when its heartbeat
                    # goes stale; this slot goes on with the next task
                    self.say(f"{tid}: {type(exc).__name__}: {exc}; leaving it to the reaper")
        finally:
            orcr.close()

    # -- one agent ----------------------------------------------------------

    def run_agent(self, orcr, tid: str, token: str, state: str, prompt: str, provider, kind):
        """Start the agent, heartbeat while it works; returns (answer, error)."""
        path = f"tasks/{self.queue.name}/{agent_segment(tid)}/{kind}_{token}"
        try:
            agent = orcr.run(
                prompt, provider=provider, path=path, cwd=self.cwd, timeout=self.timeout
            )
        except Exception as exc:  # refused admission: a bad provider, the server down
            raise AgentRefused(f"orcr would not start the agent: {exc}") from exc
        hb = self.queue.read_heartbeat(tid) or {}
        self.queue.write_heartbeat(tid, dict(hb, agent=agent["path"], uuid=agent["uuid"]))
        self.say(f"{tid}: started {agent['path']}")
        from orcr_core.sdk import AgentEnded, WaitTimeout

        try:
            while True:
                if not self.queue.holds(tid, state, token):
                    return None, "the claim was reaped"
                self.queue.touch(tid)
                try:
                    orcr.wait(agent["uuid"], until="idle", timeout=self.heartbeat)
                    break
                except WaitTimeout:
                    continue
                except AgentEnded as exc:
                    return None, str(exc)
            res = orcr.read(agent["uuid"])
            if not res.get("text"):
                return None, f"the agent's turn ended {res.get('turn_status')} with no answer"
            return res["text"], None
        finally:
            try:
                orcr.kill(agent["uuid"])
            except Exception:  # already ended
                pass

    def build(self, orcr, tid: str, token: str) -> None:
        task = self.queue.read("doing", tid)
        provider = task.meta.get("provider") or (self.providers[0] if self.providers else None)
        answer, error = self.run_agent(
            orcr, tid, token, "doing", builder_prompt(self.queue, task), provider, "build"
        )
        if error == "the claim was reaped":
            self.say(f"{tid}: {error}")
            return
        if error is not None:
            dst = self.queue.fail_build(tid, token, error)
            self.say(f"{tid}: attempt failed ({error}) -> {dst}/")
            return
        question = last_line(answer, "QUESTION")
        if question and question not in answered_questions(task):
            self.queue.park(tid, token, question)
            self.say(f"{tid}: parked in inbox/: {question}")
            return
        # one writer: only the holder of the claim writes the task's results file
        if self.queue.holds(tid, "doing", token):
            write_atomic(self.queue.root / "results" / f"{tid}.md", answer.rstrip() + "\n")
        self.queue.finish_build(tid, token, last_line(answer, "REVISION"), provider or "default")
        self.say(f"{tid}: built -> review/")

    def verify(self, orcr, tid: str, token: str) -> None:
        task = self.queue.read("verifying", tid)
        used = list(task.meta.get("passes") or [])
        candidates = self.providers or installed_families()
        provider = pick_verifier_provider(task.meta.get("built_by"), used, candidates)
        answer, error = self.run_agent(
            orcr, tid, token, "verifying", verifier_prompt(self.queue, task), provider, "verify"
        )
        if error == "the claim was reaped":
            self.say(f"{tid}: {error}")
            return
        if error is not None:
            self.queue.return_verification(tid, token)
            self.say(f"{tid}: verification could not run ({error}) -> review/")
            return
        verdict = last_line(answer, "VERDICT")
        passed = bool(verdict) and verdict.lower().split()[0].strip(".:,") == "pass"
        report = (verdict or "no VERDICT line in the verifier's answer") + "\n\n" + answer.strip()
        dst = self.queue.verdict(tid, token, passed, provider or "default", report)
        self.say(f"{tid}: {'passed' if passed else 'rejected'} -> {dst}/")
