"""Server CPU per agent lifetime (issue 39 item 3): echo agents on real tmux, all live
at once, each taken through run (admission, promotion, start, turn 1), `send` (turn
2) and kill, with the server's CPU (``/proc/<pid>/stat``, every thread) read between
the phases and divided by N.

Goal: <= 30 ms per lifetime for the echo agent. Where the real Claude Code CLI is
installed it is not run here (it costs money); this bench is the echo figure.

    python bench/lifetime.py [--n 40] [--profile OUT]

``--profile OUT`` attaches py-spy (``pip install py-spy``) to the server for the three
phases, sampling only the thread that holds the GIL (so its samples are Python CPU,
not waits), and writes its collapsed stacks to OUT: where the figure comes from.
"""

from __future__ import annotations

import argparse
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _harness import TICK, cpu_seconds  # noqa: E402
from idle import Fleet  # noqa: E402

GOAL_MS = 30.0


def _all(store: Path, n: int, done, what: str, timeout: float) -> None:
    """Wait until all ``n`` agents are ``done(status, turn)``, reading the store
    read-only: polling through the server would add its own CPU to the figure."""
    deadline = time.monotonic() + timeout
    while True:
        conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
        try:
            rows = conn.execute(
                "SELECT status, turn FROM agent WHERE path LIKE 'life/%'"
            ).fetchall()
        finally:
            conn.close()
        if len(rows) == n and all(done(*r) for r in rows):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: {sorted({r[0] for r in rows})}")
        time.sleep(0.2)


def _sys_seconds(pid: int) -> float:
    """The kernel's share of :func:`cpu_seconds` (stime, every thread)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[12]) / TICK


def main(n: int, profile: str | None = None) -> None:
    from orcr_core.sdk import Orcr
    from orcr_core.sdk.client import Client

    fleet = Fleet("tmux", n, poll_only=False)
    try:
        pid, store = fleet.proc.pid, fleet.home / "store.db"
        time.sleep(2.0)  # the start settles
        phases = []
        spy = None
        if profile:
            spy = subprocess.Popen(
                [
                    "py-spy",
                    "record",
                    "--pid",
                    str(pid),
                    "--gil",
                    "--nonblocking",
                    "--format",
                    "raw",
                    "--rate",
                    "250",
                    "--output",
                    profile,
                ],
                stdout=subprocess.DEVNULL,
            )
            time.sleep(1.0)  # py-spy attaches
        with Orcr(Client(fleet.home / "run" / "orcr.sock", autostart=False)) as o:
            c, s0, w0 = cpu_seconds(pid), _sys_seconds(pid), o.status()["write_transactions"]

            def mark(name):
                nonlocal c
                now = cpu_seconds(pid)
                phases.append((name, (now - c) * 1000 / n))
                c = now

            for i in range(n):
                o.run("hi", provider="echo", path=f"life/a{i}", cwd="/tmp")
            _all(store, n, lambda s, t: s == "idle" and t >= 1, "turn 1", 60 + 2 * n)
            mark("run + turn 1")
            for i in range(n):
                o.send(f"life/a{i}", "again")
            _all(store, n, lambda s, t: s == "idle" and t >= 2, "turn 2", 60 + n)
            mark("send + turn 2")
            o.kill("life/*")
            _all(store, n, lambda s, t: s == "ended", "kill", 60 + n)
            mark("kill")
            sys_ms = (_sys_seconds(pid) - s0) * 1000 / n
            writes = (o.status()["write_transactions"] - w0) / n
        if spy is not None:
            spy.send_signal(2)  # SIGINT: py-spy writes what it sampled
            spy.wait(30)
    finally:
        fleet.close()
    total = sum(ms for _, ms in phases)
    print(f"echo agents on tmux, N = {n}, all live at once; server CPU per agent:")
    for name, ms in phases:
        print(f"  {name:15} {ms:7.1f} ms")
    print(f"  {'lifetime':15} {total:7.1f} ms (goal <= {GOAL_MS:.0f})")
    print(f"  of which system {sys_ms:.1f} ms; store write transactions per agent {writes:.1f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=40)
    ap.add_argument("--profile", metavar="OUT", help="py-spy's collapsed stacks of the server")
    args = ap.parse_args()
    main(args.n, args.profile)
