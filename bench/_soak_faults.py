"""The soak's fault injector (bench/soak.py): one fault every few seconds, picked by
the seeded rng from :attr:`Faults.kinds`.

- ``server_kill``: SIGKILL the server, restart it after 0-1.5 s;
- ``server_stop``: SIGSTOP it for 0.5-4 s;
- ``tmux_kill`` / ``herdr_restart``: the multiplexer goes away (bench/_soak_mux.py),
  orcr starts it again when it needs it;
- ``supervisor_kill``, ``agent_tree_kill``, ``worker_kill``: SIGKILL a loop run's
  supervisor, an agent pane's whole process tree, a task worker (started again);
- ``sleep_through_fire``: a once loop due in 1 s and the server stopped 3.5 s across it;
- ``disk_full``: the small tmpfs ``ORCR_HOME`` filled to its last byte for 0.5-4 s,
  then freed (only when the soak could mount one: root);
- ``clock_jump``: the wall clock of every process of the instance jumps 30-150 s
  forward, the monotonic clock does not: the machine slept (bench/_soak_clock).
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

PY = sys.executable


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
        kind = self.rng.choice(self.kinds)
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
        return self.inst.mux.fault(self.rng)

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
        path, size = fill(self.inst.home)
        try:
            time.sleep(hold)
        finally:
            path.unlink()
        return f"{self.inst.home} full ({size >> 20} MiB filler) for {hold:.1f}s"

    def clock_jump(self):
        jump = self.rng.uniform(30, 150)
        self.offset += jump
        tmp = self.inst.clock.with_suffix(".tmp")
        tmp.write_text(f"{self.offset:.3f}\n")
        os.replace(tmp, self.inst.clock)
        return f"wall clock +{jump:.0f}s (now +{self.offset:.0f}s)"
