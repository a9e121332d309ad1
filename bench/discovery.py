"""Unmanaged discovery's cost: what the server pays for the user's other herdr sessions.

A private server on the herdr emulator (its own session), no managed agents, and K
other herdr sessions (emulators under a private ``XDG_CONFIG_HOME``) with M detected
agents each. Discovery rides the reconciliation pass, so over a window of idleness
the server's CPU (``/proc/<pid>/stat``, a percentage of one core) is compared with the
same server with no other sessions, measured in the same run at the same
``timings.reconcile_every`` (default here 1s: thirty times the default rate, so the
cost per pass shows). Also printed: the store write transactions per second during the
window (a steady world must write nothing), the CPU per pass derived from the
difference, and how long a status change in another session takes to reach
``agent ls --unmanaged`` (bounded by one pass).

    python bench/discovery.py                     # K in 1 5, M = 10, 20 s windows
    python bench/discovery.py --sessions 10 --agents 20 --every 30s --window 60
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime


class Setup:
    def __init__(self, sessions: int, agents: int, every: str):
        from orcr_herdr.testing.emulator import Emulator

        self.home = Path(tempfile.mkdtemp(prefix="orcr-disc-", dir="/tmp"))
        xdg = self.home / "xdg"
        self.own = Emulator(self.home / "herdr.sock", self.home / "own", shell=["/bin/sh"])
        self.own.start()
        self.others = []
        for i in range(sessions):
            emu = Emulator.for_session(xdg, f"user{i}", shell=["/bin/sh"]).start()
            for _ in range(agents):
                emu.add_agent("claude", "idle")
            self.others.append(emu)
        (self.home / "config.toml").write_text(
            f'[driver]\nname = "herdr"\n[herdr]\nsocket = "{self.home / "herdr.sock"}"\n'
            f'[timings]\nreconcile_every = "{every}"\n'
        )
        self.env = dict(os.environ, ORCR_HOME=str(self.home), XDG_CONFIG_HOME=str(xdg))
        for var in ("ORCR_PATH", "ORCR_SOCKET", "TMUX", "HERDR_SOCKET_PATH"):
            self.env.pop(var, None)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "orcr_core.server"],
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + 30
        while True:
            s = socket.socket(socket.AF_UNIX)
            try:
                s.connect(str(self.home / "run" / "orcr.sock"))
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
            finally:
                s.close()
        self._until(lambda: self.status()["unmanaged"] == sessions * agents, 60)

    def orcr(self, *args: str) -> str:
        return subprocess.run(
            [sys.executable, "-m", "orcr_core.cli", *args],
            env=self.env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    def status(self) -> dict:
        return json.loads(self.orcr("server", "status", "--json"))

    @staticmethod
    def _until(fn, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not fn():
            if time.monotonic() > deadline:
                raise TimeoutError("condition not reached")
            time.sleep(0.01)

    def update_latency(self) -> float:
        """A status change in another session until ``unmanaged.list`` shows it."""
        from orcr_core.client import Client
        from orcr_core.sdk import Orcr

        emu = self.others[0]
        pane = emu.panes()[0].pane_id
        with Orcr(Client(self.home / "run" / "orcr.sock", autostart=False)) as o:
            t0 = time.monotonic()
            emu.set_agent_status(pane, "working")
            self._until(
                lambda: any(
                    u["pane_id"] == pane and u["status"] == "working"
                    for u in o.unmanaged()
                    if u["session"] == "user0"
                ),
                120,
            )
            return time.monotonic() - t0

    def close(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        for emu in [self.own, *self.others]:
            emu.stop()
        shutil.rmtree(self.home, ignore_errors=True)


def measure(sessions: int, agents: int, every: str, window: float) -> dict:
    s = Setup(sessions, agents, every)
    try:
        time.sleep(2.0)  # let the start settle before the window opens
        pid = s.proc.pid
        w0, c0, t0 = s.status()["write_transactions"], _cpu_seconds(pid), time.monotonic()
        time.sleep(window)  # the measurement window: nothing changes anywhere
        c1, t1 = _cpu_seconds(pid), time.monotonic()
        w1 = s.status()["write_transactions"]
        latency = s.update_latency() if sessions else None
        return {
            "cpu_pct": 100.0 * (c1 - c0) / (t1 - t0),
            "writes_per_s": (w1 - w0) / (t1 - t0),
            "latency_s": latency,
        }
    finally:
        s.close()


def main() -> int:
    from orcr_core.config import parse_duration

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", type=int, nargs="+", default=[1, 5])
    ap.add_argument("--agents", type=int, default=10, help="detected agents per session")
    ap.add_argument("--every", default="1s", help="timings.reconcile_every")
    ap.add_argument("--window", type=float, default=20.0, help="seconds of idleness measured")
    args = ap.parse_args()
    every = parse_duration(args.every, "every")
    base = measure(0, 0, args.every, args.window)
    print(f"reconcile_every {args.every}; baseline (no other session): cpu {base['cpu_pct']:.2f}%")
    print("sessions  agents   cpu%  cpu/base  ms per pass  writes/s  update latency s")
    ok = True
    for k in args.sessions:
        r = measure(k, args.agents, args.every, args.window)
        per_pass = 1000 * (r["cpu_pct"] - base["cpu_pct"]) / 100 * every
        ok &= r["writes_per_s"] == 0 and r["latency_s"] <= every + 1.0
        print(
            f"{k:8} {k * args.agents:7} {r['cpu_pct']:6.2f} "
            f"{r['cpu_pct'] / base['cpu_pct'] if base['cpu_pct'] else float('nan'):9.2f} "
            f"{per_pass:12.2f} {r['writes_per_s']:9.2f}  {r['latency_s']:.2f}",
            flush=True,
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
