"""The soak's fault injector (bench/soak.py): one fault every few seconds, picked by
the seeded rng from :attr:`Faults.kinds`.

- ``server_kill``: SIGKILL the server, restart it after 0-1.5 s;
- ``server_stop``: SIGSTOP it for 0.5-4 s;
- ``tmux_kill`` / ``herdr_restart``: the multiplexer goes away (bench/_soak_mux.py),
  orcr starts it again when it needs it; 60% of them are aimed at an agent's start
  (its pane made, its first prompt not typed yet), and then herdr is SIGKILLed;
- ``supervisor_kill``, ``agent_tree_kill``, ``worker_kill``: SIGKILL a loop run's
  supervisor, an agent pane's whole process tree, a task worker (started again);
- ``sleep_through_fire``: a once loop due in 1 s and the server stopped 3.5 s across it;
- ``disk_full``: the small tmpfs ``ORCR_HOME`` filled to its last byte for 0.5-4 s,
  then freed (only when the soak could mount one: root); 60% of them are aimed at a
  prompt's delivery: the fault sends an idle client agent a prompt and fills the disk
  once the server has accepted it, so the store refuses one of its steps' commits;
- ``clock_jump``: the wall clock of every process of the instance jumps 30-150 s
  forward, the monotonic clock does not: the machine slept (bench/_soak_clock).

The kinds are not equally likely (:data:`WEIGHTS`): a full disk and the multiplexer's
restart are picked three times as often as the others, so a two-minute run (CI's)
reaches each several times; at equal odds, two planted bugs only they reach went
uncaught in 2-2.5 minutes (docs/internals.md "Chaos soak").
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import psutil

from orcr_core.sdk.client import ServerError, call_once

PY = sys.executable
#: how much likelier a kind is than one of weight 1 (every kind not named here)
WEIGHTS = {"disk_full": 3, "tmux_kill": 3, "herdr_restart": 3}


def kill_tree(pid: int) -> None:
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return
    for p in procs:
        try:
            p.kill()
        except psutil.Error:
            pass


def fill(where: Path) -> tuple[Path, int]:
    """Fill the filesystem of ``where`` to its last byte: a file as large as the free
    space (fallocate), then 4 KiB writes until one is refused. Returns (file, bytes)."""
    path = where / f"filler-{os.getpid()}-{time.monotonic_ns()}"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    size = 0
    try:
        st = os.statvfs(where)
        free = st.f_bavail * st.f_frsize
        try:
            os.posix_fallocate(fd, 0, max(free - 65536, 1))
            size = max(free - 65536, 1)
            os.lseek(fd, size, os.SEEK_SET)
        except OSError:
            pass
        while True:
            size += os.write(fd, b"\0" * 4096)
    except OSError:
        pass
    finally:
        os.close(fd)
    return path, size


class Faults:
    def __init__(self, inst, rng: random.Random, log, tasks):
        self.inst, self.rng, self.log, self.tasks = inst, rng, log, tasks
        self.done: Counter = Counter()
        self.kinds = [
            "server_kill",
            "server_stop",
            f"{inst.mux.name}_{'kill' if inst.mux.name == 'tmux' else 'restart'}",
            "supervisor_kill",
            "agent_tree_kill",
            "worker_kill",
            "sleep_through_fire",
            "clock_jump",
        ]
        if inst.disk:
            self.kinds.append("disk_full")
        self.sleeps = 0
        self.offset = 0.0  # the wall clock's total jump

    def inject(self) -> None:
        kind = self.rng.choices(self.kinds, [WEIGHTS.get(k, 1) for k in self.kinds])[0]
        try:
            what = getattr(self, kind)()
        except (OSError, psutil.Error, subprocess.SubprocessError) as exc:
            self.log(f"fault {kind} could not be injected: {exc!r}")
            return
        if what:
            self.done[kind] += 1
            self.log(f"fault {kind}: {what}")

    def server_kill(self):
        for p in self.inst.servers():
            p.kill()
            until = time.monotonic() + 10
            while p.pid in {s.pid for s in self.inst.servers()} and time.monotonic() < until:
                time.sleep(0.05)
            time.sleep(self.rng.uniform(0, 1.5))
            self.inst.start_server()
            return f"pid {p.pid}, restarted"

    def server_stop(self):
        for p in self.inst.servers():
            pause = self.rng.uniform(0.5, 4)
            p.send_signal(signal.SIGSTOP)
            time.sleep(pause)
            p.send_signal(signal.SIGCONT)
            return f"pid {p.pid} for {pause:.1f}s"

    def tmux_kill(self):
        aim = ""
        if self.rng.random() < 0.6:
            aim = self.aim_at_a_start()
        what = self.inst.mux.fault(self.rng, kill=bool(aim))
        return what and what + aim

    def aim_at_a_start(self) -> str:
        """Wait (up to 15 s) for an agent whose pane was just made and whose first
        prompt is not typed yet: a multiplexer killed then loses that pane (herdr: a
        workspace made less than its save delay ago), hands its id to the next pane
        made, and the agent's pipeline must not type into that one."""
        until = time.monotonic() + 15
        while time.monotonic() < until:
            rows = self.inst.store(
                "SELECT path FROM agent WHERE status = 'starting' AND pane_id IS NOT NULL"
            )
            if rows:
                return f", aimed at {rows[0][0]}'s start"
            time.sleep(0.01)
        return ""

    herdr_restart = tmux_kill

    def supervisor_kill(self):
        rows = self.inst.store("SELECT sup_pid FROM loop_run WHERE status = 'running'")
        pids = [pid for (pid,) in rows if pid]
        if pids:
            pid = self.rng.choice(sorted(pids))
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                return None
            return f"supervisor {pid}"

    def sleep_through_fire(self):
        """The machine sleeps through a fire: a once loop due in 1 s, and the server
        stopped for 3.5 s across it (``loops.missed_after`` is 1 s): it must be missed,
        never fired late."""
        self.sleeps += 1
        name = f"slept{self.sleeps}"
        res = self.inst.cli(
            "loop", "create", name, "--once-at", "1s", "--", PY, "-c", "pass",
            cwd=str(self.inst.home),
        )  # fmt: skip
        servers = self.inst.servers()
        if res is None or res.returncode != 0 or not servers:
            return None
        servers[0].send_signal(signal.SIGSTOP)
        time.sleep(3.5)
        servers[0].send_signal(signal.SIGCONT)
        return f"{name}: server stopped 3.5 s across its fire"

    def worker_kill(self):
        return self.tasks.kill_worker(self.rng)

    def agent_tree_kill(self):
        panes = sorted(self.inst.mux.panes())
        if panes:
            pid, label = self.rng.choice(panes)
            kill_tree(pid)
            return f"{label} (pane pid {pid})"

    def disk_full(self):
        hold = self.rng.uniform(0.5, 4)
        aim = ""
        if self.rng.random() < 0.6:
            aim = self.aim_at_a_send()
        path, size = fill(self.inst.home)
        try:
            time.sleep(hold)
        finally:
            path.unlink()
        return f"{self.inst.home} full ({size >> 20} MiB filler) for {hold:.1f}s{aim}"

    def aim_at_a_send(self) -> str:
        """Send an idle echo agent of the clients a prompt (waiting up to 15 s for one
        to be idle), straight on the server's socket (a CLI process takes seconds to
        start on a loaded machine, past the idle GC), and return once its Enter is
        requested (``prompt.enter_requested``; up to 10 s): the disk fills while the
        Enter is pressed (herdr waits 0.3 s after the paste), before its applied
        event's commit."""
        until = time.monotonic() + 15
        while not (
            idle := self.inst.store(
                "SELECT path FROM agent WHERE status = 'idle' AND pending_prompt IS NULL "
                "AND provider = 'echo' AND path GLOB 'w[0-9]*' ORDER BY idle_since DESC, path"
            )
        ):
            if time.monotonic() > until:
                return ""
            time.sleep(0.05)
        # the agent idle the shortest time (idle GC ends one after 4 s), and no draw:
        # the faults that follow do not depend on the timing
        (path,) = idle[0]
        sock = self.inst.home / "run" / "orcr.sock"
        since = (self.inst.store("SELECT max(seq) FROM event") or [(0,)])[0][0] or 0
        try:
            # each aimed send its own text: the checker's exactly-once rule reads a text
            # that reaches one agent twice as one prompt typed twice
            since_text = f"[sleep 0.5] disk {since}"
            call_once("agent.send", 10, sock, target=path, prompt=since_text)
        except (OSError, ServerError) as exc:
            return f", {path}'s agent send refused ({exc})"
        until = time.monotonic() + 10
        while time.monotonic() < until:
            if self.inst.store(
                f"SELECT 1 FROM event WHERE seq > {since} AND kind = 'prompt.enter_requested' "
                f"AND json_extract(data, '$.path') = '{path}'"
            ):
                return f", aimed at {path}'s agent send, its Enter requested"
            time.sleep(0.005)
        return f", aimed at {path}'s agent send (its Enter not seen requested)"

    def clock_jump(self):
        jump = self.rng.uniform(30, 150)
        self.offset += jump
        tmp = self.inst.clock.with_suffix(".tmp")
        tmp.write_text(f"{self.offset:.3f}\n")
        os.replace(tmp, self.inst.clock)
        return f"wall clock +{jump:.0f}s (now +{self.offset:.0f}s)"
