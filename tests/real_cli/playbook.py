"""The task-queue playbook at scale, with the real CLIs (issue 40 item 4): its repository,
its scripted model and what watches the run. ``test_playbook.py`` runs it.

The model is one :class:`Model` script served by both fake APIs: a builder's turn is a
shell command that writes a module and its unit test and commits them in the builder's
checkout, then ``REVISION: HEAD``; a verifier's turn runs that unit test in its own
checkout, and its verdict is what the test run gave (the command's exit status, read
from the file the command wrote). Three tasks differ: ``t01`` is built wrong first
(its test fails, so the verifier rejects it for real), ``t02`` asks a question first
(parked until the test answers it), and the last task depends on ``t01``: its module
imports ``t01``'s, so its test passes only when its checkout holds ``t01``'s work.
"""

from __future__ import annotations

import re
import subprocess
import threading
import time
from datetime import datetime
from pathlib import Path

import psutil
from fake_models import Script, Tool
from real_cli.fleet import tree_memory

WRONG, ASKS = "t01", "t02"  # rejected once, then rebuilt; parks a question first
QUESTION = "should value() count from one?"


def tid(n: int) -> str:
    return f"t{n:02d}"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def make_repo(repo: Path) -> None:
    """A small Python package (``calc``) with a unit-test package, one commit on main."""
    git(repo, "init", "-q", "-b", "main")
    for pkg in ("calc", "tests"):
        (repo / pkg).mkdir()
        (repo / pkg / "__init__.py").write_text("")
    git(repo, "add", ".")
    git(repo, "-c", "user.email=t@x", "-c", "user.name=t", "commit", "-qm", "calc")


def module(t: str, n: int, dependant: bool, wrong: bool) -> tuple[list[str], list[str]]:
    """The lines of ``calc/<t>.py`` and of its test."""
    code = ["def value():", f"    return {n + 100 if wrong else n}"]
    want = n
    if dependant:  # builds on t01's module: in its tree only when t01's work is
        code = [
            f"from calc import {WRONG}",
            "",
            "def value():",
            f"    return {WRONG}.value() + {n}",
        ]
        want = 1 + n
    test = [
        "import unittest",
        f"from calc import {t}",
        "",
        "class Value(unittest.TestCase):",
        "    def test_value(self):",
        f"        self.assertEqual({t}.value(), {want})",
    ]
    return code, test


def build_command(t: str, n: int, dependant: bool, wrong: bool) -> str:
    code, test = module(t, n, dependant, wrong)

    def write(lines: list[str], path: str) -> str:
        return "printf '%s\\n' " + " ".join(f"'{line}'" for line in lines) + f" > {path}"

    return (
        f"{write(code, f'calc/{t}.py')} && {write(test, f'tests/test_{t}.py')} && "
        f"git add calc tests && git -c user.email=b@x -c user.name=builder commit -qm '{t}'"
    )


class Model(Script):
    """The playbook's model, for both fake APIs (see the module's docstring).

    ``gate``: builders' first requests wait until it is set, so the test can see the
    global cap filled with working agents whatever the load (``arrived`` counts them)."""

    def __init__(self, tasks: int, out: Path):
        super().__init__()
        self.tasks, self.out = tasks, out
        self.gate = threading.Event()
        self.arrived: set[str] = set()
        self._seen = threading.Lock()

    def step(self, prompt: str, index: int):
        if m := re.search(r"Verify task (t\d+):", prompt or ""):
            return self.verify(m[1], index)
        if m := re.search(r"This is task (t\d+) of the task queue", prompt or ""):
            return self.build(m[1], prompt, index)
        return super().step(prompt, index)

    def build(self, t: str, prompt: str, index: int):
        if t == ASKS and "## Answer" not in prompt:
            return (
                f"I need to know one thing first.\nQUESTION: {QUESTION}" if index == 0 else "done"
            )
        if index == 0:
            if not self.gate.is_set():
                with self._seen:
                    self.arrived.add(t)
                self.gate.wait(600)
            n = int(t[1:])
            wrong = t == WRONG and "## Reject" not in prompt
            return Tool.bash(build_command(t, n, n == self.tasks, wrong))
        return (
            f"Built {t}: calc/{t}.py and its test, committed.\nREVISION: HEAD"
            if index == 1
            else "done"
        )

    def verify(self, t: str, index: int):
        rc = self.out / f"{t}.rc"
        if index == 0:
            log = self.out / f"{t}.log"
            return Tool.bash(f"python3 -m unittest -q tests.test_{t} > {log} 2>&1; echo $? > {rc}")
        if index > 1:
            return "done"
        code = rc.read_text().strip() if rc.exists() else "missing"
        if code == "0":
            return f"The test of {t} passes.\nVERDICT: pass"
        if code == "missing":
            return f"The test did not run.\nVERDICT: unverifiable no result for {t}"
        return f"tests.test_{t} failed (exit {code}).\nVERDICT: reject {t}: its unit test fails"


class Watch:
    """Samples the server while the playbook runs: live agents (all and per provider,
    from ``server status``) and each live TUI's memory (its pane's process tree)."""

    def __init__(self, home, socket: Path):
        self.home, self.socket = home, socket
        self.live = 0
        self.queued = 0  # rows waiting for a slot, at the last sample
        self.peak = 0
        self.peaks: dict[str, int] = {}
        self.rss: dict[str, int] = {}  # provider -> the largest one TUI's tree took
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Watch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        from orcr_core.sdk import Orcr
        from orcr_core.sdk.client import Client

        with Orcr(Client(self.socket, autostart=False)) as o:
            n = 0
            while not self._stop.wait(0.5):
                try:
                    s = o.status()
                except Exception:  # noqa: BLE001 (a sample missed under load)
                    continue
                self.samples += 1
                self.live, self.queued = s["live"], s["queue_depth"]
                self.peak = max(self.peak, s["live"])
                for p, v in s["providers"].items():
                    if v["live"] or p in self.peaks:
                        self.peaks[p] = max(self.peaks.get(p, 0), v["live"])
                n += 1
                if n % 4 == 0:
                    self._memory(o)

    def _memory(self, o) -> None:
        try:
            providers = {a["path"]: a["provider"] for a in o.list(prefix="tasks/")}
            res = subprocess.run(
                ["tmux", "-S", str(self.home.mux.socket), "list-panes", "-a", "-F",
                 "#{pane_pid}|#{@orcr_path}"],
                capture_output=True, text=True, timeout=10,
            )  # fmt: skip
        except Exception:  # noqa: BLE001
            return
        for line in res.stdout.splitlines():
            pid, _, path = line.partition("|")
            if path in providers and pid.isdigit():
                rss = tree_memory(int(pid))[0]
                p = providers[path]
                self.rss[p] = max(self.rss.get(p, 0), rss)


def epoch(stamp: str | None) -> float | None:
    """An ISO 8601 time as ``agent ls`` prints it (``...Z``), in epoch seconds."""
    if stamp is None:
        return None
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def overlap(agents: list[dict]) -> tuple[int, dict[str, int]]:
    """The most agents live at once, all and per provider, from their own start and end
    times (a slot is freed at ``ended_at`` before one taken at the same instant)."""
    marks = []
    for a in agents:
        if a.get("started_at") is None:
            continue
        marks.append((epoch(a["started_at"]), 1, a["provider"]))
        marks.append((epoch(a["ended_at"]) or time.time(), -1, a["provider"]))
    marks.sort(key=lambda m: (m[0], m[1]))
    now, peak, per, peaks = 0, 0, {}, {}
    for _, d, p in marks:
        now += d
        per[p] = per.get(p, 0) + d
        peak = max(peak, now)
        peaks[p] = max(peaks.get(p, 0), per[p])
    return peak, peaks


#: what a process of the run has in its command line: a worker, a claim guard
OF_THE_RUN = (" tasks work ", "orcr_tasks.guard")


def stray(home, clis: Path) -> list[str]:
    """Processes of the run still alive: of this orcr home (ORCR_HOME in their
    environment), a worker or its claim guard, or anything run from the CLIs' install
    folder ``clis`` (a TUI, Codex's app-server daemon), and agent panes still open. The
    orcr server's own (its tmux server and control client, the loop supervisor) stay."""
    from _support.home import processes_under

    out = []
    for pid, name in processes_under(home.path):
        try:
            cmd = " ".join(psutil.Process(pid).cmdline())
        except psutil.Error:
            continue
        if str(clis) in cmd or any(mark in f"{cmd} " for mark in OF_THE_RUN):
            out.append(f"{pid} {name}: {cmd[:200]}")
    return out + [f"pane {label}" for label in home.mux.labels() if label.startswith("tasks/")]
