"""The soak's fault injector (bench/soak.py): one fault every few seconds, picked by
the seeded rng from :attr:`Faults.kinds`.

- ``server_kill``: SIGKILL the server, restart it after 0-1.5 s;
- ``server_stop``: SIGSTOP it for 0.5-4 s;
- ``tmux_kill`` / ``herdr_restart``: the multiplexer goes away (bench/_soak_mux.py),
  orcr starts it again when it needs it; 60% of them (herdr: 80%) are aimed at an
  agent's start (its pane made, its first prompt not typed yet), and then herdr is
  SIGKILLed; on herdr the server is stopped meanwhile, herdr started again by the
  fault and tabs opened in it until one gets the agent's lost pane id, which orcr
  must then not type into (:meth:`Faults.herdr_under_a_start`);
- ``supervisor_kill``, ``agent_tree_kill``, ``worker_kill``: SIGKILL a loop run's
  supervisor, an agent pane's whole process tree, a task worker (started again);
- ``sleep_through_fire``: a once loop due in 1 s and the server stopped 3.5 s across it;
- ``disk_full``: the small tmpfs ``ORCR_HOME`` filled to its last byte for 0.5-4 s,
  then freed (only when the soak could mount one: root), the store's ``-wal``
  truncated first so that its next commits must grow it and are refused; 60% of them
  are aimed at a prompt's delivery: the fault sends an idle client agent a prompt and
  stops the server as soon as it has accepted it, fills the disk, and lets it go on,
  so the store refuses the commit of the delivery's next step;
- ``clock_jump``: the wall clock of every process of the instance jumps 30-150 s
  forward, the monotonic clock does not: the machine slept (bench/_soak_clock).

The kinds are not equally likely (:data:`WEIGHTS`): a full disk and the multiplexer's
restart are picked three times as often as the others, so a two-minute run (CI's)
reaches each several times; at equal odds, and without the aims above, two planted
bugs only they reach went uncaught in 2-2.5 minutes (docs/internals.md "Chaos soak").
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
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
#: the share of the multiplexer's restarts aimed at an agent's start
AIMED = {"tmux": 0.6, "herdr": 0.8}


def squash(text: str) -> str:
    return "".join(text.split())


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
        self.typed: list[str] = []  # prompts typed into a pane not their agent's
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
        if self.rng.random() < AIMED[self.inst.mux.name]:
            if self.inst.mux.name == "herdr":
                what = self.herdr_under_a_start()
                if what:
                    return what
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

    def herdr_under_a_start(self) -> str | None:
        """herdr SIGKILLed under an echo agent's start (its pane made since herdr's last
        save, its first prompt's Enter not pressed yet), the server stopped meanwhile,
        herdr started again and tabs opened in it until one gets that pane's id
        (someone using the restarted herdr); then nothing may have been typed into that
        tab: orcr types only into a pane carrying its agent's marks."""
        db = f"file:{self.inst.home / 'store.db'}?mode=ro"
        q = "SELECT uuid, path, pane_id FROM agent WHERE status = 'starting' AND provider = 'echo'"
        until, done = time.monotonic() + 15, None
        conn = sqlite3.connect(db, uri=True, timeout=10)  # one connection: a fast poll
        try:
            seen = {u for u, _, pane in conn.execute(q) if pane}  # made before: maybe saved
            while done is None and time.monotonic() < until:
                for uuid, path, pane in conn.execute(q).fetchall():
                    if pane and uuid not in seen:
                        seen.add(uuid)
                        if self.prompt_of(uuid):
                            done = self.relaunch_under(uuid, path, pane)
                            break
                time.sleep(0.005)
        except sqlite3.Error:
            pass
        finally:
            conn.close()
        if done is None:
            self.log("herdr restart: no echo agent's start to aim at within 15 s")
            return None
        uuid, path, pane, (what, opened, before) = done
        if opened:
            until = time.monotonic() + 20
            while time.monotonic() < until and self.inst.store(
                f"SELECT 1 FROM agent WHERE uuid = '{uuid}' AND status = 'starting'"
            ):
                time.sleep(0.1)
            time.sleep(1.0)  # a paste or an Enter lands
            after = self.inst.mux.screen(pane)
            if before and after is not None and squash(after) != squash(before):
                self.typed.append(
                    f"{path}'s start typed into {pane}, a tab opened after herdr's restart, "
                    f"not its pane: {after.strip()[-160:]!r}"
                )
            self.inst.mux.close(opened)
        return f"{what}, aimed at {path}'s start"

    def relaunch_under(self, uuid: str, path: str, pane: str) -> tuple | None:
        """The server stopped, herdr relaunched with tabs opened up to ``pane``, the
        server continued; None (nothing done) if the start typed its prompt first."""
        servers = self.inst.servers()
        for p in servers:
            p.send_signal(signal.SIGSTOP)
        try:
            if self.inst.store(
                f"SELECT 1 FROM event WHERE agent = '{uuid}' AND kind = 'prompt.enter_applied'"
            ):
                return None  # typed already: the next start is aimed at
            done = self.inst.mux.relaunch(pane)
        finally:
            for p in servers:
                p.send_signal(signal.SIGCONT)
        return None if done is None else (uuid, path, pane, done)

    def prompt_of(self, uuid: str) -> str:
        try:
            launch = json.loads((self.inst.home / "agents" / uuid / "launch.json").read_text())
        except (OSError, ValueError):
            return ""
        return launch.get("prompt") or ""

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
        aim, stopped = "", []
        if self.rng.random() < 0.6:
            aim, stopped = self.aim_at_a_send()
        try:
            if self.inst.truncate_wal():
                aim += ", the store's -wal truncated"
            path, size = fill(self.inst.home)
        finally:
            for p in stopped:
                p.send_signal(signal.SIGCONT)
        try:
            time.sleep(hold)
        finally:
            path.unlink()
        return f"{self.inst.home} full ({size >> 20} MiB filler) for {hold:.1f}s{aim}"

    def aim_at_a_send(self) -> tuple[str, list]:
        """Send an idle echo agent of the clients a prompt (waiting up to 15 s for one
        to be idle), straight on the server's socket (a CLI process takes seconds to
        start on a loaded machine, past the idle GC), and SIGSTOP the server as soon as
        it has accepted it: the disk fills (and the store's ``-wal`` is truncated)
        before the delivery's next step, whose commit the full disk then refuses.
        Returns what was aimed at and the servers stopped (the caller continues them)."""
        until = time.monotonic() + 15
        while not (
            idle := self.inst.store(
                "SELECT path FROM agent WHERE status = 'idle' AND pending_prompt IS NULL "
                "AND provider = 'echo' AND path GLOB 'w[0-9]*' AND path NOT GLOB '*/exit_*' "
                "ORDER BY idle_since DESC, path"  # (an [exit] agent ends after its turn)
            )
        ):
            if time.monotonic() > until:
                return "", []
            time.sleep(0.05)
        # the agent idle the shortest time (idle GC ends one after 4 s), and no draw:
        # the faults that follow do not depend on the timing
        (path,) = idle[0]
        sock = self.inst.home / "run" / "orcr.sock"
        since = (self.inst.store("SELECT max(seq) FROM event") or [(0,)])[0][0] or 0
        servers = self.inst.servers()
        try:
            # each aimed send its own text: the checker's exactly-once rule reads a text
            # that reaches one agent twice as one prompt typed twice
            call_once("agent.send", 10, sock, target=path, prompt=f"[sleep 0.5] disk {since}")
        except (OSError, ServerError) as exc:
            return f", {path}'s agent send refused ({exc})", []
        for p in servers:
            p.send_signal(signal.SIGSTOP)
        steps = self.inst.store(
            f"SELECT kind FROM event WHERE seq > {since} AND kind LIKE 'prompt.%' "
            f"AND json_extract(data, '$.path') = '{path}' ORDER BY seq"
        )
        done = ", ".join(k.removeprefix("prompt.") for (k,) in steps) or "nothing"
        return f", aimed at {path}'s agent send (recorded: {done})", servers

    def clock_jump(self):
        jump = self.rng.uniform(30, 150)
        self.offset += jump
        tmp = self.inst.clock.with_suffix(".tmp")
        tmp.write_text(f"{self.offset:.3f}\n")
        os.replace(tmp, self.inst.clock)
        return f"wall clock +{jump:.0f}s (now +{self.offset:.0f}s)"
