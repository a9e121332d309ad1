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
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _harness import (  # noqa: E402
    bench_env,
    idle_window,
    server_status,
    start_server,
    stop_server,
    until,
)


class Setup:
    def __init__(self, sessions: int, agents: int, every: str):
        from orcr_testing.herdr.emulator import Emulator

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
        self.env = bench_env(self.home, XDG_CONFIG_HOME=str(xdg))
        self.proc = start_server(self.env)
        until(lambda: server_status(self.env)["unmanaged"] == sessions * agents, 60)

    def update_latency(self) -> float:
        """A status change in another session until ``unmanaged.list`` shows it."""
        from orcr_core.sdk import Orcr
        from orcr_core.sdk.client import Client

        emu = self.others[0]
        pane = emu.panes()[0].pane_id
        with Orcr(Client(self.home / "run" / "orcr.sock", autostart=False)) as o:
            t0 = time.monotonic()
            emu.set_agent_status(pane, "working")
            until(
                lambda: any(
                    u["pane_id"] == pane and u["status"] == "working"
                    for u in o.unmanaged()
                    if u["session"] == "user0"
                ),
                120,
                interval=0.01,
            )
            return time.monotonic() - t0

    def close(self) -> None:
        stop_server(self.proc)
        for emu in [self.own, *self.others]:
            emu.stop()
        shutil.rmtree(self.home, ignore_errors=True)


def measure(sessions: int, agents: int, every: str, window: float) -> dict:
    s = Setup(sessions, agents, every)
    try:
        r = idle_window(s.proc, s.env, window)
        r["latency_s"] = s.update_latency() if sessions else None
        return r
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
