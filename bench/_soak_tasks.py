"""The soak's task queue (bench/soak.py): a queue, a builder and a verifier worker,
and a stream of tasks, with echo agents doing the work.

The builder's prompt starts with the task's text and the verifier's with its
``done_when`` (plugins/tasks prompts.py), so the echo agent's directives and its
answer (the prompt itself) decide the outcome: ``[fail]`` in the text is a failed
build (an attempt), ``VERDICT: reject`` as ``done_when`` a reject (an attempt; the
third sends the task to failed/), ``VERDICT: pass`` a pass.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import threading
from collections import Counter

PY = sys.executable
#: text, done_when
KINDS = {
    "pass": ("[sleep 1] build it", "VERDICT: pass"),
    "reject": ("[sleep 0.5] build it", "VERDICT: reject not good enough"),
    "fail": ("[fail] cannot build", "VERDICT: pass"),
}


class Tasks:
    def __init__(self, inst, seed: int, stop: threading.Event, log):
        self.inst, self.stop, self.log = inst, stop, log
        self.rng = random.Random(seed * 1000 + 777)
        self.root = inst.home / "queue"
        self.cwd = inst.home / "work"
        self.workers: dict[str, subprocess.Popen] = {}
        self.added: Counter = Counter()
        self.ids: list[str] = []  # every task added, for the checker
        self.log_file = open(inst.home.parent / "workers.out", "ab")  # noqa: SIM115 - closed in end()

    def setup(self) -> None:
        self.cwd.mkdir(exist_ok=True)
        res = self.inst.cli("tasks", "init", str(self.root))
        if res is None or res.returncode != 0:
            raise SystemExit(f"tasks init failed: {res and res.stderr}")
        for role in ("builder", "verifier"):
            self.start(role)

    def start(self, role: str) -> None:
        self.workers[role] = subprocess.Popen(
            [PY, "-m", "orcr_core.cli", "tasks", "work", str(self.root), "--role", role,
             "-p", "echo", "--timeout", "20s", "--heartbeat", "1s", "--stale", "6s",
             "--cwd", str(self.cwd)],
            env=self.inst.env, stdout=self.log_file, stderr=self.log_file,
            start_new_session=True,
        )  # fmt: skip

    def adder(self) -> None:
        n = 0
        while not self.stop.wait(self.rng.uniform(2, 6)):
            n += 1
            kind = self.rng.choice(sorted(KINDS))
            text, done_when = KINDS[kind]
            res = self.inst.cli(
                "tasks", "add", str(self.root), "--id", f"{kind}{n}", "--done-when", done_when,
                "-p", "echo", "--", text,
            )  # fmt: skip
            if res is not None and res.returncode == 0:
                self.added[kind] += 1
                self.ids.append(f"{kind}{n}")
            for role, proc in list(self.workers.items()):
                if proc.poll() is not None and not self.stop.is_set():
                    self.log(f"worker {role} exited {proc.returncode}: restarted")
                    self.start(role)

    def kill_worker(self, rng: random.Random):
        role = rng.choice(sorted(self.workers))
        proc = self.workers[role]
        if proc.poll() is not None:
            return None
        proc.kill()
        proc.wait(10)
        self.start(role)
        return f"{role} worker {proc.pid}, restarted"

    def end(self) -> None:
        """Stop the workers (TERM, then KILL): what they claimed stays claimed."""
        for proc in self.workers.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.workers.values():
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        self.log_file.close()
